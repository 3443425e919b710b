"""Errors sorted by who is to blame.

Stage: none (shared by every stage).

``UserError``: bad input from the person running mas (a file, a line, a field, an option).
The CLI prints its one-line message and exits with code 2, having written nothing.

``Stopped``: something outside that input stopped the command (the embedded model server
died). The CLI prints its one-line message and exits with code 1; what was recorded stays, and
the same command resumes.

``ModelReplyError``: the model answered something unusable. It keeps the raw reply; the
stage that called the model counts it and skips that group or edit, never the whole step.
"""


class UserError(Exception):
    """Bad input. The message is one line and names the file, line or field."""


class Stopped(Exception):
    """The command could not go on, through no fault of its input. The message is one line and
    says what to do next."""


class ModelReplyError(Exception):
    """A model reply that failed validation. ``raw`` keeps what the model said."""

    def __init__(self, message: str, raw: str = ""):
        super().__init__(message)
        self.raw = raw


class EndpointError(Exception):
    """The model endpoint failed after every retry: a transport-level fault. A learning stage
    counts and skips it without journaling it, so a resumed run tries that call again; a
    rollout that fails on it is journaled as an errored rollout that scores 0. ``status`` and
    ``said``: the HTTP status of a refusal no retry cures (400, 401, 404...) and the server's own
    words, unredacted (they are read, never shown)."""

    def __init__(self, message: str, status: int | None = None, said: str = ""):
        super().__init__(message)
        self.status, self.said = status, said
