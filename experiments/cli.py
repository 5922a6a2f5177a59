"""What the commands share (experiments.train, experiments.predict, experiments.label_issues_from_features): a wrong
input ends them with its message alone.

  if __name__ == "__main__":
    cli.run(main)              # absl's app.run(main), with the changes below

- An errors.InputError raised by `main` (a config value out of range or choices, a missing or unreadable file or
  folder, a dataset without its folder, weights that do not fit the network) is printed as `error: MESSAGE` to
  stderr, without a traceback, and the command exits with status 2 (EXIT_INPUT_ERROR). Any other exception is a
  programming error and keeps its traceback; NOISY_JAX_TRACEBACK=1 shows an InputError's traceback too.
- At flag parsing (absl prints `FATAL Flags parsing error: ...` and exits with status 1): a config file whose
  get_config raises a ValueError (a config string it does not know) is reported by that error's message, without
  the traceback ml_collections puts in it; an override of a field the config does not have (--config.model.nme=x)
  names the flag, where it ended in a traceback.

Nothing here imports JAX: `label_issues_from_features --features=...` starts without it.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import textwrap
from typing import Callable

from absl import app
from absl import flags

from noisy_jax.core import errors

EXIT_INPUT_ERROR = 2  # as a usage error (argparse's status)
TRACEBACK_ENV = "NOISY_JAX_TRACEBACK"
_FLAGS_HELP = "Pass --helpshort or --helpfull to see help on flags."


def report_input_errors(main: Callable) -> Callable:
  """`main` that prints an errors.InputError as `error: MESSAGE` to stderr and exits with EXIT_INPUT_ERROR."""

  @functools.wraps(main)
  def wrapped(argv):
    try:
      return main(argv)
    except errors.InputError as error:
      if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
        raise
      print(f"error: {error}", file=sys.stderr, flush=True)
      sys.exit(EXIT_INPUT_ERROR)

  return wrapped


def _config_file_message(message: str) -> str:
  """A flag error of ml_collections' config_flags whose config file raised a ValueError: 'flag --config=F: MESSAGE'
  without the traceback it embeds; any other flag error as it is."""
  head, marker, rest = message.partition(": Error whilst parsing config file:")
  last = re.search(r"\n\s*(?:ValueError|[\w.]*InputError): (.*?)\s*$", rest, re.S) if marker else None
  return f"{head}: {textwrap.dedent(last[1])}" if last else message


def _override_being_applied(error: BaseException) -> str | None:
  """The '--config.FIELD' override that ml_collections' config flag was applying when `error` was raised (read
  from the traceback: its `_parse` loops over `field_path`), or None."""
  tb, found = error.__traceback__, None
  while tb is not None:
    local = tb.tb_frame.f_locals
    if isinstance(local.get("field_path"), str) and hasattr(local.get("self"), "name"):
      found = f"--{local['self'].name}.{local['field_path']}"
    tb = tb.tb_next
  return found


def _fail(message: str) -> None:
  """Prints a flag error as absl's app.parse_flags_with_usage does and exits with its status, 1."""
  lines = f"\n{textwrap.indent(message, '  ')}" if "\n" in message else f" {message}"
  sys.stderr.write(f"FATAL Flags parsing error:{lines}\n{_FLAGS_HELP}\n")
  sys.exit(1)


def _unknown_field_message(error: BaseException) -> str:
  """'--config.model.nme: the config has no field 'nme' (did you mean 'name'?).' from the error config_flags
  raises for an override of a field the config does not have."""
  text = str(error.args[0] if error.args else error)
  text = str(error.args[0].args[0]) if error.args and isinstance(error.args[0], KeyError) else text
  key = re.match(r"\W*'([^']+)'", text)
  guess = re.search(r'Did you mean "([^"]+)"', text)
  flag = _override_being_applied(error)
  field = f" {key[1]!r}" if key else ""
  return f"{flag}: the config has no field{field}{f' (did you mean {guess[1]!r}?)' if guess else ''}."


def parse_flags(argv: list[str]) -> list[str]:
  """absl's app.parse_flags_with_usage, with the two config-flag messages of the module docstring."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    _fail(_config_file_message(str(error)))
  except (AttributeError, KeyError) as error:  # config_flags: an override of a field the config does not have
    if _override_being_applied(error) is None:
      raise
    _fail(_unknown_field_message(error))
  return []  # not reached: _fail exits


def run(main: Callable) -> None:
  """absl's app.run(main) with `report_input_errors` and `parse_flags` (module docstring)."""
  app.run(report_input_errors(main), flags_parser=parse_flags)
