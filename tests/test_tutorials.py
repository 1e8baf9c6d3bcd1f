"""The tutorials under docs/tutorials/ followed literally, as a newcomer would follow them.

Each page is read top to bottom and every step it shows is performed, in a
temporary directory, with this virtualenv's ``python``, ``django-admin`` and
``flask`` first on ``PATH``. What the pages must look like for that:

* **Shell steps** are ```` ```console ```` blocks. A line starting with ``$ ``
  is a command, run with ``bash`` in the directory the previous commands left
  (``cd`` is followed); a command holding a here-document (``<<'EOF'``) goes on
  to its ``EOF`` line. The lines after a command, up to the next one, are what
  the reader is told they will see: each must be found in the command's output
  (stdout and stderr together, trailing blanks ignored, runs of blanks equal),
  in that order, with anything between them. Inside a line ``…`` stands for any
  text; a line that is only ``…`` is an elision and matches nothing. Every
  command must exit with status 0.
* **Not run**: the reader's own set-up, which this virtualenv already is
  (``python -m venv``, ``source …/activate``, ``pip install``).
* **The development server** (``python manage.py runserver``, ``flask … run``)
  starts in the background on a free port, with its own reloader off; its
  expected lines are looked for in its log once it answers. Whenever a file
  block is written while it runs, it is restarted before the next command, as
  the reloader the page relies on would restart it. The page's address
  (``127.0.0.1:8000``, ``127.0.0.1:5000``) becomes the free port's in every
  command and expected line.
* **Files** are fenced blocks with a title: ```` ```python title="catalog/models.py" ````
  writes the block as the whole file (relative to the commands' directory at
  that point); a title ending in ``(add at the end)`` appends the block to the
  file, which must exist (e.g. the ``settings.py`` that ``startproject`` made).
  ``127.0.0.1:11211`` in a file is replaced with the address of the test's own
  memcached (the session's, flushed first).
* Anything else (```` ```text ````, prose) is for the reader only.
* **A third-party tool's own words** (Django's and Flask's banners, progress
  and "no issues" lines) are told in prose, never shown as a command's
  expected lines: they change between versions (Django 6.1's runserver says
  "Starting WSGI development server"), and a page must pass on every version
  the project supports. Such a command is checked by its exit status, and what
  it made by the steps after it. ``test_no_step_expects_a_tools_own_wording``
  holds the pages to that.

Then each test checks, from the transcript of what ran, that the page showed
what the tutorial is for (a miss then a hit, an edit that refreshes the page,
a counter that counts, the stats command's counts), and the mutation tests
check that a page whose cached view lost its tags fails where the reader would
see the old page.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.stray_servers import listening_on, stop

DOCS = Path(__file__).resolve().parent.parent / "docs" / "tutorials"
VENV_BIN = Path(sys.executable).parent
PAGE_MEMCACHED = "127.0.0.1:11211"
PAGE_ADDRESSES = ("127.0.0.1:8000", "127.0.0.1:5000")
NOT_RUN = re.compile(r"^(python3? -m venv\b|source \S*activate\b|\. \S*activate\b|pip3? install\b)")
SERVER = re.compile(r"^(python3? manage\.py runserver|flask( --\S+( [^-]\S*)?)* run)\b")
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
INDENTED_STEP = re.compile(r"^[ \t]+```(console|\w+[^\n]*title=)[^\n]*", re.M)
APPEND = " (add at the end)"
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
COMMAND_TIMEOUT = 90
TOOLS_OWN_WORDS = re.compile(
    r"^(python3? manage\.py (?!mcache_)\w+|django-admin\b|flask (run|shell|--\S+)\b)"
)
"""Commands whose output is Django's or Flask's wording, not mcache's or the page's code's."""
MEMCACHED_START = re.compile(r"`(memcached -d -l 127\.0\.0\.1 -p 11211[^`]*)`")


class StepFailed(AssertionError):
    """A step of the page did not do what the page says."""


@dataclass
class Command:
    text: str
    expected: list[str]
    line: int


@dataclass
class FileBlock:
    path: str
    body: str
    append: bool
    line: int


@dataclass
class Ran:
    """One command as it ran: the text after substitutions, and its output."""

    command: str
    output: str


def parse(page: str) -> list[Command | FileBlock]:
    """Return the page's steps in order: commands and file blocks."""
    indented = INDENTED_STEP.search(page)
    if indented:  # inside an admonition or a list: a step this runner would not see
        raise ValueError(f"an indented step: {indented.group(0).strip()!r}; write steps unindented")
    steps: list[Command | FileBlock] = []
    for fence in FENCE.finditer(page):
        lang, info, body = fence.groups()
        line = page.count("\n", 0, fence.start()) + 1
        title = TITLE.search(info)
        if title:
            path = title.group(1)
            append = path.endswith(APPEND)
            path = path.removesuffix(APPEND)
            if not re.fullmatch(r"[\w./-]+", path):
                raise ValueError(f"line {line}: a file title is a path, got {title.group(1)!r}")
            steps.append(FileBlock(path, body, append, line))
        elif lang == "console":
            steps.extend(_commands(body, line))
    return steps


def _commands(body: str, line: int) -> list[Command]:
    commands: list[Command] = []
    lines = body.split("\n")
    index = 0
    while index < len(lines):
        text = lines[index]
        if not text.startswith("$ "):
            if not commands:
                raise ValueError(f"line {line + index + 1}: output before any command: {text!r}")
            commands[-1].expected.append(text)
            index += 1
            continue
        command, start = [text[2:]], index
        heredoc = HEREDOC.search(text)
        if heredoc:
            end = lines.index(heredoc.group(1), index + 1)  # ValueError if it never ends
            command += lines[index + 1 : end + 1]
            index = end
        commands.append(Command("\n".join(command), [], line + start + 1))
        index += 1
    return commands


def matches(expected: list[str], output: str) -> str | None:
    """Return None if each expected line is in ``output``, in order; else the first that is not."""
    actual = [_blanks(line) for line in output.splitlines()]
    position = 0
    for want in expected:
        if want.strip() in {"", "…", "..."}:
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in _blanks(want).split("…")))
        for index in range(position, len(actual)):
            if pattern.fullmatch(actual[index]):
                position = index + 1
                break
        else:
            return want
    return None


def _blanks(line: str) -> str:
    return " ".join(line.split())


def _hearing_ctrl_c() -> None:
    """In the server's process, before it starts: let SIGINT stop it, as Ctrl-C does.

    A suite started in the background by a shell without job control (``… &``)
    inherits SIGINT ignored, and so would the server: it would outlive :meth:`stop_server`
    by 15 s, be killed, and never add its counts to the store at exit.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Follower:
    """Follows a page's steps in ``root``; ``memcached`` replaces the page's server."""

    root: Path
    memcached: str
    port: int = field(default_factory=free_port)
    transcript: list[Ran] = field(default_factory=list)
    cwd: Path = field(init=False)
    server: subprocess.Popen[bytes] | None = field(default=None, init=False)
    server_command: str = field(default="", init=False)
    server_log: Path = field(init=False)
    changed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.cwd = self.root
        self.server_log = self.root.parent / f"{self.root.name}-server.log"
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "FLASK_", "MCACHE_", "PYTHON", "VIRTUAL_ENV"))
        }
        self.env.update(
            PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            VIRTUAL_ENV=str(VENV_BIN.parent),
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
        )

    def follow(self, page: str) -> list[Ran]:
        """Perform every step of ``page``; raise StepFailed at the first that goes wrong."""
        try:
            for step in parse(page):
                if isinstance(step, FileBlock):
                    self.write(step)
                elif not NOT_RUN.match(step.text):
                    self.run(step)
        finally:
            self.stop_server()
        return self.transcript

    def local(self, text: str) -> str:
        for address in PAGE_ADDRESSES:
            text = text.replace(address, f"127.0.0.1:{self.port}")
        return text

    def write(self, block: FileBlock) -> None:
        path = self.cwd / block.path
        body = block.body.replace(PAGE_MEMCACHED, self.memcached)
        if block.append:
            if not path.exists():
                raise StepFailed(f"line {block.line}: {block.path} should exist to be added to")
            with path.open("a", encoding="utf-8") as file:
                file.write("\n" + body)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        self.changed = True

    def run(self, command: Command) -> None:
        if SERVER.match(command.text):
            self.start_server(command)
            return
        if self.server is not None and self.changed:
            self.restart_server()
        text = self.local(command.text)
        cwd_file = self.root.parent / f"{self.root.name}-cwd"
        script = f'{text}\nstatus=$?\npwd > "{cwd_file}"\nexit $status\n'
        try:
            done = subprocess.run(
                ["bash", "-c", script],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=COMMAND_TIMEOUT,
            )
        except subprocess.TimeoutExpired as error:
            raise StepFailed(
                f"line {command.line}: {text!r} ran over {COMMAND_TIMEOUT}s"
            ) from error
        output = done.stdout.decode(errors="replace")
        self.transcript.append(Ran(text, output))
        self.cwd = Path(cwd_file.read_text().strip())
        if done.returncode != 0:
            raise StepFailed(
                f"line {command.line}: {text!r} exited with {done.returncode}:\n{output}"
            )
        self.check(command, output)

    def check(self, command: Command, output: str) -> None:
        missing = matches([self.local(line) for line in command.expected], output)
        if missing is not None:
            raise StepFailed(
                f"line {command.line}: {self.local(command.text)!r} should show {missing!r};"
                f" it showed:\n{output}"
            )

    def start_server(self, command: Command) -> None:
        if self.server is not None:
            raise StepFailed(f"line {command.line}: a server is running already")
        extra = (
            f" 127.0.0.1:{self.port} --noreload"
            if "manage.py" in command.text
            else f" --host 127.0.0.1 --port {self.port} --no-reload"
        )
        self.server_command = command.text + extra
        self.launch()
        self.check(command, self.server_log.read_text(errors="replace"))

    def launch(self) -> None:
        self.changed = False
        with self.server_log.open("ab") as log:
            self.server = subprocess.Popen(
                ["bash", "-c", f"exec {self.server_command}"],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_hearing_ctrl_c,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        log = self.server_log.read_text(errors="replace")
        self.stop_server()
        raise StepFailed(f"{self.server_command!r} did not answer on port {self.port}:\n{log}")

    def restart_server(self) -> None:
        self.stop_server()
        self.launch()

    def stop_server(self) -> None:
        """Stop the server as Ctrl-C would (it adds its counts to the store at exit)."""
        server, self.server = self.server, None
        if server is None or server.poll() is not None:
            return
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


# -- what the transcript must show ---------------------------------------------------------------


def x_cache(output: str) -> str:
    found = re.findall(r"^X-Cache: (\w+)", output, re.M)
    assert len(found) == 1, f"one X-Cache header in {output!r}"
    return found[0]


def counts(stats_output: str) -> dict[str, int]:
    """Return mcache's own counters from the stats report (its second table)."""
    section = stats_output.split("mcache (every process", 1)[1]
    return {
        name: int(value.replace(",", ""))
        for name, value in re.findall(r"^\s*(hits|misses|builds)\s+([\d,]+)\s*$", section, re.M)
    }


def read(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


@pytest.fixture
def memcached(memcached_url: str) -> str:
    """The address (host:port) of a flushed memcached of the test session."""
    return memcached_url.removeprefix("memcached://")


def follow(tmp_path: Path, memcached: str, page: str) -> Follower:
    root = tmp_path / "reader"
    root.mkdir()
    follower = Follower(root, memcached)
    follower.follow(page)
    return follower


def check_shop(follower: Follower, edit: str, product_page: str, stats_command: str) -> None:
    """Check what either tutorial's shop must have shown, from the commands that ran.

    ``edit`` is in the text of the commands that change a product from another
    process, ``product_page`` in the URL of the teapot's page.
    """
    ran = follower.transcript
    home = f"http://127.0.0.1:{follower.port}/ "
    # The list page: rendered once, then served from memcached.
    states = [x_cache(r.output) for r in ran if "curl -si" in r.command and home in r.command]
    assert states[:2] == ["MISS", "HIT"], states
    # A change committed by another process makes it stale: rendered again, with the new price.
    edits = [index for index, r in enumerate(ran) if edit in r.command]
    assert edits, f"the page changes a product ({edit})"
    after = [r.output for r in ran[edits[0] + 1 :] if "curl -si" in r.command and home in r.command]
    assert x_cache(after[0]) == "MISS" and "19.00" in after[0], after[0]
    assert x_cache(after[1]) == "HIT" and "19.00" in after[1], after[1]
    # The product page counts one view per request, starting from the views column (41).
    pages = [r.output for r in ran if product_page in r.command]
    views = [int(v) for output in pages for v in re.findall(r"(\d+) views", output)]
    assert views[:2] == [42, 43] and views == sorted(set(views)), views
    # The stats command reads what the server processes counted.
    reports = [r.output for r in ran if stats_command in r.command]
    assert reports, f"the page runs {stats_command}"
    stats = counts(reports[-1])
    assert stats["hits"] >= 3 and stats["misses"] >= 3, stats


# -- the runner itself --------------------------------------------------------------------------


def test_the_runner_reads_steps_and_checks_output() -> None:
    page = (
        '```python title="app.py"\nx = 1\n```\n'
        '```python title="app.py (add at the end)"\ny = 2\n```\n'
        "```console\n$ cat <<'EOF'\nhello\nEOF\nhello\n$ echo hi\n…\nhi\n```\n"
        "```text\n$ not a step\n```\n"
    )
    steps = parse(page)
    assert [type(s).__name__ for s in steps] == ["FileBlock", "FileBlock", "Command", "Command"]
    assert (steps[0].append, steps[1].append, steps[1].path) == (False, True, "app.py")
    assert steps[2].text == "cat <<'EOF'\nhello\nEOF" and steps[2].expected == ["hello"]
    assert matches(["X-Cache: MISS"], "a\nX-Cache:   MISS\r\n") is None
    assert matches(["X-Cache: MISS"], "X-Cache: HIT\n") == "X-Cache: MISS"
    assert matches(["b", "a"], "a\nb\n") == "a"  # in order
    assert matches(["counts as of … s ago"], "counts as of 3 s ago\n") is None
    assert matches(["counts as of … s ago"], "counts as of 3 s\n") == "counts as of … s ago"
    with pytest.raises(ValueError, match="a file title is a path"):
        parse('```python title="settings.py, at the end"\n```\n')
    with pytest.raises(ValueError, match="an indented step"):
        parse("!!! note\n\n    ```console\n    $ echo hi\n    ```\n")


@pytest.mark.parametrize("page", ["django.md", "flask.md"])
def test_no_step_expects_a_tools_own_wording(page: str) -> None:
    steps = [step for step in parse(read(page)) if isinstance(step, Command)]
    tools = [step for step in steps if TOOLS_OWN_WORDS.match(step.text)]
    assert tools, "the page runs Django's or Flask's own commands"
    for step in tools:
        shown = [line for line in step.expected if line.strip() not in {"", "…", "..."}]
        assert shown == [], f"line {step.line}: {step.text!r} expects the tool's words {shown}"


@pytest.mark.parametrize("page", ["django.md", "flask.md"])
def test_the_memcached_start_command_starts_one(page: str) -> None:
    """Where no service manager runs, the command the page gives starts memcached.

    The daemon it starts (``-d``: it forks and returns) is found by the port it
    was told to listen on, and stopped, whatever user it runs as (``-u memcache``
    could write no pid file in a folder of the test's).
    """
    (command,) = set(MEMCACHED_START.findall(read(page)))
    port = free_port()
    argv = command.replace("11211", str(port)).split()
    assert subprocess.run(argv, timeout=10).returncode == 0, argv  # -d: returns at once
    daemon: set[int] = set()
    try:
        deadline = time.monotonic() + 10
        while not daemon and time.monotonic() < deadline:
            daemon = listening_on(port)
            time.sleep(0.05)
        assert daemon, f"nothing listens on {port} after {argv}"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as server:
            server.sendall(b"version\r\n")
            assert server.recv(100).startswith(b"VERSION ")
    finally:
        stop(daemon or listening_on(port))
    assert listening_on(port) == set(), "the daemon is stopped"


def test_a_step_that_shows_something_else_fails(tmp_path: Path) -> None:
    (tmp_path / "reader").mkdir()
    page = "```console\n$ echo one\ntwo\n```\n"
    with pytest.raises(StepFailed, match="should show 'two'"):
        Follower(tmp_path / "reader", "127.0.0.1:1").follow(page)
    with pytest.raises(StepFailed, match="exited with 3"):
        Follower(tmp_path / "reader", "127.0.0.1:1").follow("```console\n$ exit 3\n```\n")
    with pytest.raises(StepFailed, match="should exist"):
        page = '```python title="missing.py (add at the end)"\nx = 1\n```\n'
        Follower(tmp_path / "reader", "127.0.0.1:1").follow(page)


# -- Django in ten minutes ----------------------------------------------------------------------


def test_django_tutorial(tmp_path: Path, memcached: str) -> None:
    page = read("django.md")
    assert PAGE_MEMCACHED in page, "the page's settings name the memcached the test swaps"
    follower = follow(tmp_path, memcached, page)
    assert (follower.cwd / "manage.py").exists() and (follower.cwd / "db.sqlite3").exists()
    check_shop(follower, "manage.py shell <<", "/products/1/", "manage.py mcache_stats")


def test_django_tutorial_fails_when_the_list_loses_depends_on(tmp_path, memcached) -> None:
    page = read("django.md")
    decorator = "@cached_view(ttl=300, depends_on=[Product])\ndef product_list"
    assert decorator in page
    page = page.replace(decorator, "@cached_view(ttl=300)\ndef product_list")
    with pytest.raises(StepFailed, match=r"should show 'X-Cache: MISS'"):
        follow(tmp_path, memcached, page)


# -- Flask in ten minutes -----------------------------------------------------------------------


def test_flask_tutorial(tmp_path: Path, memcached: str) -> None:
    page = read("flask.md")
    assert PAGE_MEMCACHED in page, "the page's config names the memcached the test swaps"
    follower = follow(tmp_path, memcached, page)
    assert (follower.cwd / "app.py").exists() and (follower.cwd / "instance" / "shop.db").exists()
    check_shop(follower, "flask shell <<", "/products/1", "flask mcache stats")


def test_flask_tutorial_fails_when_the_list_loses_its_tags(tmp_path, memcached) -> None:
    page = read("flask.md")
    decorator = re.compile(r"@mcache\.cached_view\([^\n]*\)\ndef product_list")
    assert len(decorator.findall(page)) == 2, "the list view, before and after step 7"
    page = decorator.sub("@mcache.cached_view(ttl=300)\ndef product_list", page)
    with pytest.raises(StepFailed, match=r"should show 'X-Cache: MISS'"):
        follow(tmp_path, memcached, page)
