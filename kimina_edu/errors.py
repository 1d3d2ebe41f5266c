"""The errors a learner can cause and fix, in one place, low in the house: every module may raise them.

Each message is one line that says what is wrong and what to do next; ``params.one_line_errors`` shows
exactly that line in a notebook instead of a traceback (the whole traceback is kept in the run folder).
Each class also derives from the builtin a caller would catch (``ValueError``, ``RuntimeError``), so code
that catches those still does. This module imports nothing from the package.
"""

from __future__ import annotations


class LearnerError(Exception):
    """A failure the learner caused and can fix — a parameter, an endpoint, a model id, a damaged file."""


class ParameterError(LearnerError, ValueError):
    """A notebook parameter out of its type or range (``params.check_params``)."""


class SetupError(LearnerError, RuntimeError):
    """The machine or the environment is not as the course needs it (a device, a package, a folder)."""


class ModelUnavailableError(LearnerError, RuntimeError):
    """The model asked for cannot be had here: not on disk, not in the cache, no hub to fetch it from."""


class PocketModelError(LearnerError, RuntimeError):
    """A shipped pocket model file is missing or does not match its record."""


class TeacherUnavailableError(LearnerError, RuntimeError):
    """The hosted teacher gave nothing to learn from."""


class CheckpointError(LearnerError, ValueError):
    """A checkpoint that cannot be trusted or used; the message names the path."""


LEARNER_ERRORS: tuple[type[LearnerError], ...] = (LearnerError,)  # every class above derives from it
