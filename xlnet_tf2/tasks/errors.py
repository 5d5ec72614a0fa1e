"""The error raised for bad task input: it names the file (or dataset) and the record."""


class TaskDataError(ValueError):
    """Bad fine-tuning input; `str(e)` starts with "<file>: record <id>: ..."."""

    def __init__(self, source: str, record, message: str):
        self.source = source
        self.record = record
        where = f"{source}: record {record}" if record is not None else source
        super().__init__(f"{where}: {message}")
