from os import PathLike

def read_regular(path: str | PathLike[str], follow: bool, limit: int, /
                 ) -> bytes | tuple[int, int]: ...
