"""One exception type for every user-facing failure: its message is the one line we print."""


class EvaltrailError(Exception):
    """A problem the user can fix; the message names the file/key and the fix."""
