"""Every error reme-agent raises on purpose.

Our exception hierarchy::

    ReMeError(message, hint)                 base: str(e) = what happened, then what to do
    ├── ConfigError                          bad or missing configuration
    │   └── ModelNotConfigured               a job needs an LLM and none is configured
    ├── VaultError                           problems with the vault folder itself
    │   ├── VaultNotFound
    │   ├── IndexLocked                      another indexer holds the lock
    │   └── StorageError(path, reason)       the disk refused a write (full, read-only, denied)
    ├── PathError                            a vault-relative path that cannot be used
    │   ├── PathEscape                       `..`, absolute, or a symlink leading outside
    │   ├── NoteNotFound(path, suggestions)
    │   │   └── FolderNotNote(path)          a folder where a note was asked for
    │   ├── AmbiguousName(name, candidates) a note name that several notes answer to
    │   ├── NoteExists(path)
    │   └── NotText(path, reason)            binary, non-UTF-8 or too large
    ├── ParseError(path, line)               malformed frontmatter YAML
    ├── WriteConflict                        writes that must not happen as asked
    │   ├── StampChanged(path, redos)        CAS: the file changed since it was read
    │   ├── ConservationViolation(path, missing_edges)   E-1/E-2: a rewrite dropped links
    │   ├── AdditiveCheckFailed(path)        auto-link: an edit that is not purely additive
    │   ├── StaleProposal                    split: the note changed since the proposal
    │   ├── SectionViolation(path, problems) synchronizer: the daily-note section rules
    │   ├── WriteRefused(path)               a job's second broken rewrite: path blocked
    │   └── WriteSkipped(path)               a job gave up on a path that kept changing
    ├── InvalidArgument                      a tool was called with a bad value
    │   ├── ReadFirst(path)                  a job rewrote a note it had not read
    │   └── FrontmatterEditError             a property edit that would harm other keys
    ├── NoDecision                           a model's answer held no usable decision
    ├── BackendError                         vector store / model backend failure
    └── OutputExists(paths)                  export-agents: files that differ, no --force

Tools and jobs raise these; each interface (AgentScope toolkit, MCP, CLI) converts them once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class ReMeError(Exception):
    """Base class: a message a model or a person can act on, plus an optional hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} {self.hint}" if self.hint else self.message


class ConfigError(ReMeError):
    """Configuration is invalid or incomplete."""


class ModelNotConfigured(ConfigError):
    """A job needs a chat model and none is configured."""

    def __init__(self, job: str, alternative: str = "") -> None:
        super().__init__(
            f"The {job} job needs a chat model, and none is configured; nothing was changed.",
            "Set `model.provider` and `model.model` in configs/*.yaml (or REME_MODEL__PROVIDER / "
            "REME_MODEL__MODEL) and put the API key in the environment variable named by "
            "`model.api_key_env`." + (f" {alternative}" if alternative else ""),
        )
        self.job = job


class VaultError(ReMeError):
    """The vault folder cannot be used."""


class VaultNotFound(VaultError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"No vault at {path!r}.",
            "Create it with `reme-agent init --vault PATH`, or pass --vault / set REME_VAULT.",
        )
        self.path = path


class IndexLocked(VaultError):
    def __init__(self, lock_path: str) -> None:
        super().__init__(
            f"Another indexer holds {lock_path}.",
            "Wait for it to finish; two indexers must never write the projections at once.",
        )
        self.lock_path = lock_path


class StorageError(VaultError):
    """The file system refused a write: no space left, a read-only vault, no permission.

    Not a bug and not corruption: nothing was changed, and the same call works once the
    disk has room or the vault is writable again.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Could not write {path!r}: {reason}; nothing was changed.",
                         "Free disk space or make the vault writable, then try again.")
        self.path = path
        self.reason = reason


class PathError(ReMeError):
    """A vault-relative path that cannot be used."""

    def __init__(self, message: str, path: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.path = path


class PathEscape(PathError):
    def __init__(self, path: str, reason: str = "it leads outside the vault") -> None:
        super().__init__(
            f"Refused path {path!r}: {reason}.",
            path,
            "Use a vault-relative path such as 'knowledge/topic/topic.md'.",
        )


class NoteNotFound(PathError):
    def __init__(self, path: str, suggestions: Sequence[str] = ()) -> None:
        self.suggestions = list(suggestions)
        hint = (
            "Did you mean: " + ", ".join(self.suggestions[:5]) + "?"
            if self.suggestions
            else "Use `list` or `search` to find the right path."
        )
        super().__init__(f"No file at {path!r}.", path, hint)


class FolderNotNote(NoteNotFound):
    """A read of a folder: say so, and how to see what it holds (a NoteNotFound still)."""

    def __init__(self, path: str, folder_note: str | None = None) -> None:
        PathError.__init__(
            self, f"{path!r} is a folder, not a note.", path,
            f"List its files with `list` (path={path!r})"
            + (f", or read its folder note {folder_note!r}." if folder_note else "."))
        self.suggestions = [folder_note] if folder_note else []


class AmbiguousName(PathError):
    """A note name (not a path) that resolves to several notes, like an ambiguous [[link]]."""

    def __init__(self, name: str, candidates: Sequence[str]) -> None:
        self.candidates = list(candidates)
        shown = ", ".join(self.candidates[:10]) + (" ..." if len(self.candidates) > 10 else "")
        super().__init__(f"{name!r} names {len(self.candidates)} notes: {shown}.", name,
                         "Pass one of these paths instead.")


class NoteExists(PathError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"A file already exists at {path!r}.",
            path,
            "Read it first and pass overwrite=True (with its stamp) to replace it, or pick another path.",
        )


class NotText(PathError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Cannot read {path!r} as text: {reason}.", path)
        self.reason = reason


class ParseError(ReMeError):
    """Malformed frontmatter; the note is still indexed as plain text."""

    def __init__(self, path: str, line: int | None, detail: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(
            f"Malformed frontmatter in {where}: {detail}",
            "Fix the YAML between the leading '---' lines; the note is indexed as plain text until then.",
        )
        self.path = path
        self.line = line
        self.detail = detail


class WriteConflict(ReMeError):
    """A write that must not happen as requested."""


class StampChanged(WriteConflict):
    """CAS: the file's bytes are not the ones the edit was planned on (DESIGN §5).

    `redos` > 0: the edit was redone that many times on newer text and the file kept
    changing, so it was given up (DESIGN §5: at most 3 redos, then skip).
    """

    def __init__(self, path: str, expected: str, actual: str | None, *, redos: int = 0) -> None:
        shown = f"stamp {expected[:12]} is now {(actual or 'deleted')[:12]}"
        if redos:
            super().__init__(
                f"{path!r} kept changing while it was edited ({redos} redo(s); {shown}); "
                "nothing was written.",
                "Another writer is busy with it; try again later.",
            )
        else:
            super().__init__(
                f"{path!r} changed since it was read ({shown}); nothing was written.",
                "Read it again, redo the edit on the new text, and write with the new stamp.",
            )
        self.path = path
        self.expected = expected
        self.actual = actual
        self.redos = redos


class ConservationViolation(WriteConflict):
    """A rewrite dropped existing outbound links (DESIGN §5 E-1/E-2)."""

    def __init__(self, path: str, missing: Iterable[tuple[str, str | None]]) -> None:
        self.missing = sorted(set(missing), key=lambda e: (e[0], e[1] or ""))
        shown = ", ".join(_edge_text(t, p) for t, p in self.missing)
        super().__init__(
            f"Refused rewrite of {path!r}: it drops existing links {shown}; nothing was written.",
            "Keep every existing [[link]] (with its predicate) in the new body and write again.",
        )
        self.path = path


def _edge_text(target: str, predicate: str | None) -> str:
    return f"{predicate}:: [[{target}]]" if predicate else f"[[{target}]]"


class AdditiveCheckFailed(WriteConflict):
    """An auto-link edit changed more than the link markup it meant to add; nothing written."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"Refused auto-link write of {path!r}: {detail}; nothing was written.",
                         "This is a bug in the planned edit; the note is left as it was.")
        self.path = path
        self.detail = detail


class StaleProposal(WriteConflict):
    """The note changed since the split proposal was made."""


class SectionViolation(WriteConflict):
    """A daily-note rewrite that breaks the section discipline (synchronizer)."""

    def __init__(self, path: str, problems: list[str]) -> None:
        super().__init__(f"Refused rewrite of {path!r}: " + " ".join(problems)
                         + " Nothing was written.",
                         'Keep those lines, or use daily_write with mode "append" and only the '
                         "new lines: the sections are then merged for you.")
        self.path = path
        self.problems = problems


class WriteRefused(WriteConflict):
    """A job broke the rewrite rules twice on one path: the path is left alone for the job."""

    def __init__(self, path: str, why: str, audit: str | None) -> None:
        super().__init__(f"Refused {path!r} for the rest of this job: {why} The old note is "
                         "kept unchanged" + (f" and the attempt is recorded in {audit}." if audit
                                             else "."),
                         "Do not write this note again; continue with the other notes.")
        self.path = path


class WriteSkipped(WriteConflict):
    """A job gave up on a note that kept changing under it (DESIGN §5: skip and audit)."""

    def __init__(self, path: str, redos: int, audit: str | None) -> None:
        super().__init__(f"Skipped {path!r}: it kept changing while this job worked on it "
                         f"({redos} redos)" + (f"; recorded in {audit}." if audit else "."),
                         "Do not write this note again; continue with the other notes.")
        self.path = path


class InvalidArgument(ReMeError):
    """A tool argument has the wrong value or type."""


class ReadFirst(InvalidArgument):
    """A job tried to rewrite a note it has not read (it has no stamp for it)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Refused rewrite of {path!r}: this job has not read it yet.",
                         f"Call read(path={path!r}) first, edit that text, then write it back.")
        self.path = path


class FrontmatterEditError(InvalidArgument):
    """A property edit that cannot be made line by line without harm (the reader would
    refuse the result, or another key would change with it); nothing was written."""


class NoDecision(ReMeError):
    """The model's final answer held no usable JSON decision; nothing is changed."""


class BackendError(ReMeError):
    """The vector store or another backend failed."""


class OutputExists(ReMeError):
    """Files outside the vault a command would replace (`export-agents` without --force)."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__(f"Refusing to overwrite {len(paths)} existing file(s) that differ: "
                         f"{', '.join(paths)}; nothing was written.",
                         "Pass --force to replace them (other servers in .mcp.json are kept).")
        self.paths = list(paths)
