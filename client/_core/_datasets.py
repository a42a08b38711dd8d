"""Datasets: rows of data that expand one case into one case per row. Rules: see
ARCHITECTURE.md, "Cases, datasets and selection".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

_ID_FIELDS: Final = ("id", "name", "key")
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class DatasetError(ValueError):
    """A dataset could not be read; the message names the file and the row."""


class DatasetRow(Mapping[str, Any]):
    """One row of a dataset."""

    __slots__ = ("_data", "id", "index", "source")

    def __init__(self, data: Mapping[str, Any], index: int, row_id: str, source: str) -> None:
        self._data = dict(data)
        self.index = index
        self.id = row_id
        self.source = source

    def __getitem__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(
                f"row {self.id!r} of {self.source} has no field {key!r}; "
                f"fields: {sorted(self._data)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def value(self, key: str) -> Any:
        return self[key]

    def string(self, key: str) -> str:
        value = self[key]
        if not isinstance(value, str):
            raise DatasetError(
                f"row {self.id!r} of {self.source}: field {key!r} must be a string, "
                f"got {type(value).__name__}"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __repr__(self) -> str:
        return f"DatasetRow({self.id!r}, {self._data!r})"


def _slug(value: Any) -> str:
    text = _SLUG.sub("-", str(value)).strip("-")
    return text[:60] or "row"


class Dataset(Sequence[DatasetRow]):
    """An ordered list of rows with unique readable ids."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], *, source: str = "<list>") -> None:
        self.source = source
        built: list[DatasetRow] = []
        seen: dict[str, int] = {}
        for index, data in enumerate(rows):
            if not isinstance(data, Mapping):
                raise DatasetError(
                    f"{source}: row {index} must be an object, got {type(data).__name__}"
                )
            row_id = f"{index:04d}"
            for field in _ID_FIELDS:
                if data.get(field) not in (None, ""):
                    row_id = _slug(data[field])
                    break
            if row_id in seen:
                raise DatasetError(
                    f"{source}: rows {seen[row_id]} and {index} share the id {row_id!r}; "
                    "give each row a unique 'id'"
                )
            seen[row_id] = index
            built.append(DatasetRow(data, index, row_id, source))
        self.rows = built

    def __getitem__(self, index: int) -> DatasetRow:  # type: ignore[override]
        return self.rows[index]

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"<Dataset {self.source} rows={len(self.rows)}>"

    # -- loaders ----------------------------------------------------------------------

    @classmethod
    def from_list(cls, rows: Sequence[Mapping[str, Any]], *, source: str = "<list>") -> Dataset:
        if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
            raise DatasetError(f"{source}: a dataset is a list of objects")
        return cls(rows, source=source)

    @classmethod
    def from_json(cls, path: str | Path) -> Dataset:
        file = Path(path)
        try:
            data = json.loads(_read(file))
        except json.JSONDecodeError as error:
            raise DatasetError(
                f"{file}: invalid JSON at line {error.lineno}: {error.msg}"
            ) from None
        return cls._from_root(data, file)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Dataset:
        file = Path(path)
        rows: list[Any] = []
        for number, line in enumerate(_read(file).splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DatasetError(f"{file}: line {number}: invalid JSON: {error.msg}") from None
            if not isinstance(rows[-1], dict):
                raise DatasetError(f"{file}: line {number}: each line must be a JSON object")
        return cls(rows, source=str(file))

    @classmethod
    def from_yaml(cls, path: str | Path) -> Dataset:
        import yaml

        file = Path(path)
        try:
            data = yaml.safe_load(_read(file))
        except yaml.YAMLError as error:
            raise DatasetError(f"{file}: invalid YAML: {error}") from None
        return cls._from_root(data, file)

    @classmethod
    def load(cls, path: str | Path) -> Dataset:
        file = Path(path)
        suffix = file.suffix.lower()
        if suffix == ".json":
            return cls.from_json(file)
        if suffix in (".jsonl", ".ndjson"):
            return cls.from_jsonl(file)
        if suffix in (".yaml", ".yml"):
            return cls.from_yaml(file)
        raise DatasetError(f"{file}: unknown dataset format; use .json, .jsonl, .yaml or .yml")

    @classmethod
    def _from_root(cls, data: Any, file: Path) -> Dataset:
        if not isinstance(data, list):
            raise DatasetError(
                f"{file}: the root must be a list of objects, got {type(data).__name__}"
            )
        return cls(data, source=str(file))


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"dataset file not found: {file}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{file}: cannot read: {error}") from None
