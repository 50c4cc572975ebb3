"""`binlake`'s start-up: a command imports its own module only (issue #37: `binlake binlog dump`
spent 0.4 s importing every command's dependencies), and --help still lists every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from binlake.cli.main import COMMAND_MODULES, build_parser, commands_of, run
from binlog_fixtures import TYPES_BINLOG

#: What the other commands import, and `binlog dump` must not.
NOT_FOR_DUMP = ("binlake.config", "binlake.source.client", "binlake.verify.status", "pyspark")


def test_binlog_dump_imports_no_other_command_and_none_of_their_dependencies() -> None:
    code = (
        "import sys\n"
        "from binlake.cli.main import run\n"
        f"code = run(['binlog', 'dump', '--rows', {str(TYPES_BINLOG)!r}])\n"
        "print(code, *sorted(m for m in sys.modules if m.startswith(('binlake', 'pyspark'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    last = result.stdout.splitlines()[-1].split()
    assert last[0] == "0"
    loaded = set(last[1:])
    others = set(COMMAND_MODULES.values()) - {COMMAND_MODULES["binlog"]}
    assert COMMAND_MODULES["binlog"] in loaded
    assert not loaded & others
    assert not [m for m in loaded if m.startswith(NOT_FOR_DUMP)]


def test_each_command_module_registers_the_command_it_is_listed_for() -> None:
    for name, module in COMMAND_MODULES.items():
        parser = build_parser([name])
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert list(commands.choices) == [name], module


@pytest.mark.parametrize(
    ("argv", "commands"),
    [
        (["binlog", "dump", "x"], ["binlog"]),
        (["check-source", "--config", "c"], ["check-source"]),
        (["--help"], list(COMMAND_MODULES)),
        (["-h", "verify"], list(COMMAND_MODULES)),
        (["no-such-command"], list(COMMAND_MODULES)),
        ([], list(COMMAND_MODULES)),
    ],
)
def test_only_a_first_word_naming_a_command_narrows_the_parser(
    argv: list[str], commands: list[str]
) -> None:
    assert commands_of(argv) == commands


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert all(f"    {name}" in out for name in COMMAND_MODULES)


def test_a_misspelt_command_is_a_usage_error_listing_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(["binlgo", "dump"])
    assert exit_.value.code == 64
    err = capsys.readouterr().err
    assert "invalid choice: 'binlgo'" in err and all(f"'{n}'" in err for n in COMMAND_MODULES)
