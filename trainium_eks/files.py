"""Reading an input file safely: bounded in size, text only, every problem one line naming the file and the fix.

Stack files, plan files, stack-output files and workflow files all come from users; each reader calls ``read_text``.
"""

from __future__ import annotations

from pathlib import Path


class UnreadableFile(Exception):
    """A file that cannot be read as text; ``problem`` is the line without the file name ("<problem>; <fix>")."""

    def __init__(self, path: Path | str, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


def read_text(path: Path, max_bytes: int, fix: str) -> str:
    """The file's text, refused (one line, ending in ``fix`` where the file itself is wrong) unless it is a
    readable UTF-8 text file of at most ``max_bytes``."""
    try:
        with open(path, "rb") as file:
            data = file.read(max_bytes + 1)  # read() of the whole file would follow /dev/zero forever
    except FileNotFoundError:
        raise UnreadableFile(path, "not found; check the path") from None
    except IsADirectoryError:
        raise UnreadableFile(path, f"is a directory; {fix}") from None
    except PermissionError:
        raise UnreadableFile(path, f"permission denied; make it readable or {fix}") from None
    except OSError as error:
        raise UnreadableFile(path, f"cannot be read ({error.strerror}); {fix}") from None
    except ValueError:  # a NUL character in the path
        raise UnreadableFile(repr(str(path)), "not a valid path; check the path") from None
    if len(data) > max_bytes:
        raise UnreadableFile(path, f"larger than {max_bytes / 2**20:g} MiB; {fix}")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UnreadableFile(path, "UTF-16 text; save it as UTF-8")
    if b"\0" in data:
        raise UnreadableFile(path, f"binary content (a NUL byte at offset {data.index(0)}); {fix}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableFile(path, f"not UTF-8 text (byte {error.start}); save it as UTF-8") from None
