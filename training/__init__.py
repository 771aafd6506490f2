"""What runs in the training images: LLM pre-training with TorchTitan (`python -m training.titan_train`), BERT
pretraining with its model and HDF5 shard reader (`python -m training.pretrain_bert`), the acceptance programs (all-reduce,
bus bandwidth, collective bandwidth, one training step), and what they share: the device and process group, checkpoints,
drains, the run record and the pods' entrypoint (`training.agent`)."""
