"""Errors people see, all in one place. Each message names the field, file or model and what was wrong with it;
the modules that raise them import them from here (and hand them on under their old names)."""


class LensError(Exception):
    """Base of every error the front ends show as a message rather than a traceback."""


class InputError(LensError, ValueError):
    """Bad user input: an empty or missing field, an unknown option."""


class Stopped(LensError):
    """A job ended before its work was done; the message says why and how far it got."""

    def __init__(self, reason: str, done: int | None = None, total: int | None = None, what: str = "items",
                 job: "object | None" = None):
        self.reason, self.done, self.total, self.what, self.job = reason, done, total, what, job
        far = f" after {done:,} of {total:,} {what}" if done is not None and total is not None else ""
        super().__init__(f"stopped{far}: {reason}")

    def __reduce__(self):  # across a process (app/core/execution/workers.py): what stopped, without the job itself
        return Stopped, (self.reason, self.done, self.total, self.what)


class WorkerGone(LensError):
    """The child process ended during a call (killed, out of memory); a fresh one replaces it."""


class WorkerFailed(LensError):
    """A Ray worker died during a batch; nothing was written, and the job can be run again."""


class AttackUnavailable(LensError):
    """A recipe whose resources are missing here; the message names them and how to get them."""


class AttackCancelled(LensError):
    """An attack stopped by its cancel event (the visitor pressed Stop)."""


class DataError(LensError, ValueError):
    """A dataset file or field that can't be read; the message names the file, line and problem."""


class UnknownPair(InputError):
    """A pair name that is not a preset or an export."""


class ModelLoadError(LensError, RuntimeError):
    """A model that can't be loaded; the message names the model and the cause."""


class WordNetMissing(LensError):
    """WordNet's data is not installed here; the message says how to get it."""


class OfflineAssetsMissing(FileNotFoundError):
    """The offline pair's files are missing from the checkout."""


class PairError(InputError):
    """Two models that can't be compared side by side."""


class DeviceError(InputError):
    """A device that is not on this machine, or a word that names none."""
