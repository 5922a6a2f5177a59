"""The error of a user's input: a config value, a file or folder that is missing or not what it should be.

  raise errors.InputError("config.model.pretrained='x.npz': unknown file type; readable: ...")
  raise errors.MissingInputError("dataset 'clothing1m' needs its folder: --config.dataset_kwargs.root=DIR ...")

Raised by the checks that a user meets (config validation, dataset folders, weight files, inputs to predict); its
message names the value or file and says what to do. The commands (experiments/cli.py) print it alone, without a
traceback, and exit with status 2; any other exception is a programming error and keeps its traceback. Both classes
subclass what the check raised before (ValueError, FileNotFoundError), so `except ValueError` still catches them.
"""

from __future__ import annotations


class InputError(ValueError):
  """A value or file given by the user is wrong; the message says which and what to give instead."""


class MissingInputError(InputError, FileNotFoundError):
  """A file or folder that the user named, or must name, is not there."""
