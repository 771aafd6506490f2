"""BERT pretraining for the platform: model, HDF5 shard reader, training entry point (`python -m training.pretrain_bert`)."""
