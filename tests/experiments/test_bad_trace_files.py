"""Damaged trace files through the commands: one line on stderr naming the file (and
its line or row where known), exit status 2, no traceback and no second line from a
library."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from experiments import compare
from experiments._cli import main_guard

ROWS = [
    {"timestamp": 500 * i, "input_length": 1500, "output_length": 3,
     "hash_ids": [1000 + i // 3, 2000 + i // 3, 3000 + i]}
    for i in range(400)
]  # fmt: skip
TEXT = "".join(json.dumps(r) + "\n" for r in ROWS)


def _compare(path: Path, *extra: str) -> int:
    args = ["workload=trace", f"workload.path={path}", "policies=least_load", "agents=none",
            "windows=1", "workload.test_fraction=1", "charts=false", "progress=false",
            f"out_dir={path.parent / 'run'}", *extra]  # fmt: skip
    return main_guard(lambda: compare.main(args))


def _offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")  # nothing is downloaded
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _offline_hub(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("empty", "empty.jsonl: no rows to tell the layout from"),
        ("bad_json", "bad_json.jsonl, line 4, row: not valid JSON"),
        ("truncated_gzip", "truncated_gzip.jsonl, line "),
    ],
)
def test_format_hub_reports_a_damaged_local_file_in_one_line(
    damage: str,
    message: str,
    tmp_path: Path,
    offline_hub: None,
    capfd: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / f"{damage}.jsonl"
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "bad_json":
        lines = TEXT.splitlines(keepends=True)
        path.write_text("".join(lines[:3]) + '{"timestamp": 5, bad\n' + "".join(lines[3:]))
    else:
        data = gzip.compress(TEXT.encode())
        path.write_bytes(data[: len(data) // 2])
    level = logging.getLogger("datasets").level
    assert _compare(path, "workload.format=hub") == 2
    assert logging.getLogger("datasets").level == level  # its log lines held back only meanwhile
    err = capfd.readouterr().err
    assert err.startswith(f"error: experiments.compare: {tmp_path}") and message in err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_hub_read_error_the_own_reader_cannot_place_names_the_line(tmp_path: Path) -> None:
    """The library, having read 5 rows of a file of a blank line after each, fails: the
    6th row is on line 11 (it named "line 6", the row's count, which is blank there)."""
    from envs.workloads.readers.hub import _hub_file_error

    path = tmp_path / "good.jsonl"
    path.write_text(TEXT.replace("\n", "\n\n"))
    error = _hub_file_error(path, 5, ValueError("cannot cast\nsecond line"))
    assert str(error) == (
        f"{path}, line 11, row: the datasets library cannot read the file from this line on "
        "(cannot cast); it reads without format=hub"
    )
    # past the last row (400 of them), the last row's line
    assert _hub_file_error(path, 400, ValueError("x")).line == 799


def _parquet(path: Path) -> Path:
    """ROWS as a parquet file of four row groups (one record batch each), snappy-compressed."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"timestamp": 50 * i, "input_length": 1500, "output_length": 3,
         "hash_ids": [1000 + i // 3, 2000 + i // 3, 3000 + i]}
        for i in range(4096)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1024, compression="snappy")
    return path


def test_a_truncated_parquet_file_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _parquet(tmp_path / "rows.parquet")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert _compare(path) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: experiments.compare: {path}, line 1, row: cannot open the file as parquet ("
    )
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_a_corrupt_parquet_page_is_named_by_file_and_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from envs.workloads.readers.sources import PARQUET_BATCH_ROWS, parquet_rows

    path = _parquet(tmp_path / "rows.parquet")
    import pyarrow.parquet as pq

    chunk = pq.ParquetFile(path).metadata.row_group(2).column(0)  # the third batch's
    start = (
        chunk.dictionary_page_offset or chunk.data_page_offset
    ) + chunk.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    for k in range(start, start + 16):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    first = 2 * PARQUET_BATCH_ROWS + 1
    assert _compare(path) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: {path}, line {first}, row: ")
    assert "cannot read the file past this row (record batch 3: " in err
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    read = []
    with pytest.raises(ValueError, match=f"line {first}, row: cannot read the file past"):
        for line, _ in parquet_rows(path):
            read.append(line)
    assert read == list(range(1, first))


@pytest.mark.parametrize("fmt", ["auto", "hub", "mooncake"])
def test_a_file_in_no_supported_format_says_so_naming_it(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """A CSV file is not "not valid JSON" but in no supported format; a file named
    ``.parquet`` without parquet's first bytes is not valid parquet."""
    if fmt == "hub":
        request.getfixturevalue("offline_hub")
    table = tmp_path / "rows.csv"
    table.write_text("timestamp,input_length,hash_ids\n0,1500,1\n")
    assert _compare(table, f"workload.format={fmt}") == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: experiments.compare: {table}, line 1, row: not valid JSON (Expecting value, "
        "column 1), and no line of the file is a JSON object: it is not a trace in a "
        "supported format (JSONL, compressed or not, or parquet)\n"
    ), err
    fake = tmp_path / "rows.parquet"
    fake.write_text(TEXT)  # JSONL under a parquet name
    assert _compare(fake, f"workload.format={fmt}") == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: {fake}, line 1, row: not a valid parquet file: it "
        "begins with b'{\"ti', not parquet's b'PAR1'\n"
    )
    assert not (tmp_path / "run").exists()


def test_a_bursted_arrival_past_a_month_in_its_window_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Bursted-ART ``arrival_s`` that is no time in a window (Unix seconds) is one
    line naming the row: read as it is, every TTFT of its window was lost to rounding
    (1.7e18 s, nanoseconds read as seconds: mean TTFT 0.0)."""
    rows = [
        {"trace_id": "w", "arrival_s": t, "input_length": 512, "hash_ids": [1, 2 + i]}
        for i, t in enumerate([0.0, 1_700_000_000, 2.0])
    ]
    path = tmp_path / "bursted.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _compare(path) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: {path}, line 2, field 'arrival_s': 1700000000 is "
        "19,676 days after the start of window 'w', read as s: arrival_s counts from its "
        "window's start, and no window spans more than 31 days (an absolute time such as "
        "Unix seconds is not one; if it counts a finer unit, set workload.time_unit= to it)\n"
    )
    assert not (tmp_path / "run").exists()


def _packed(kind: str, path: Path) -> None:
    """TEXT (or, for ``parquet.*``, ROWS as parquet) packed as ``kind``."""
    import bz2
    import lzma
    import zipfile

    if kind == "zstd":  # (no zstd in the standard library: its frame's first bytes)
        path.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    elif kind == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("trace.jsonl", TEXT)
    else:
        pack = {
            "parquet.gz": gzip.compress,
            "parquet.bz2": bz2.compress,
            "parquet.xz": lzma.compress,
        }
        path.write_bytes(pack[kind](_parquet(path.with_suffix(".plain")).read_bytes()))


def _zstandard() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


READ = "JSONL (plain or compressed with gzip, bzip2, xz or zstd)"


@pytest.mark.parametrize(
    ("kind", "name", "says"),
    [
        pytest.param(
            "zstd", "t.jsonl.zst", "zstd-compressed, which is read with the zstandard module, "
            "not installed: unpack it first (zstd -d t.jsonl.zst), or pip install zstandard",
            marks=pytest.mark.skipif(_zstandard(), reason="zstandard reads it"),
        ),
        ("zip", "t.zip", f"zip-compressed, and only {READ} and parquet are read: unpack it "
         "first (unzip t.zip)"),
        ("parquet.gz", "t.parquet.gz", "a gzip-compressed parquet file, which is not read "
         "(parquet compresses its own pages): decompress it first (gunzip -k t.parquet.gz)"),
        ("parquet.bz2", "t.parquet.bz2", "a bzip2-compressed parquet file, which is not read "
         "(parquet compresses its own pages): decompress it first (bunzip2 -k t.parquet.bz2)"),
        ("parquet.xz", "t.parquet.xz", "an xz-compressed parquet file, which is not read "
         "(parquet compresses its own pages): decompress it first (unxz -k t.parquet.xz)"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("fmt", ["auto", "mooncake", "hub"])
def test_a_file_packed_in_a_way_not_read_says_how_to_unpack_it(
    kind: str,
    name: str,
    says: str,
    fmt: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Read as JSONL, such a file was said to be Latin-1 text, with an iconv line."""
    if fmt == "hub":
        _offline_hub(tmp_path, monkeypatch)
    path = tmp_path / name
    _packed(kind, path)
    assert _compare(path, f"workload.format={fmt}") == 2
    err = capsys.readouterr().err
    assert err == f"error: experiments.compare: {path}: the file is {says}\n"
    assert not (tmp_path / "run").exists()


def _rows_of(run: Path) -> list[dict[str, object]]:
    """A compare run's rows, less what depends on the wall clock or names the file."""
    rows = json.loads((run / "results.json").read_text())["rows"]
    kept = ("wall_s", "requests_per_s", "workload")
    return [{k: v for k, v in row.items() if k not in kept} for row in rows]


@pytest.mark.parametrize("kind", ["bzip2", "xz", "zstd"])
@pytest.mark.parametrize("fmt", ["auto", "hub", "hub folder"])
def test_a_bzip2_xz_or_zstd_trace_runs_as_the_file_unpacked(
    kind: str,
    fmt: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Given alone, and with workload.format=hub (a file, a dataset folder's data file):
    format=hub refused them ("unpack it first"), which the datasets library read before;
    zstd needs the zstandard module, as the library's reading of it does."""
    import bz2
    import lzma

    if kind == "zstd":
        zstandard = pytest.importorskip("zstandard")
        data = zstandard.ZstdCompressor(write_checksum=True).compress(TEXT.encode())
    else:
        data = (bz2.compress if kind == "bzip2" else lzma.compress)(TEXT.encode())
    suffix = {"bzip2": ".bz2", "xz": ".xz", "zstd": ".zst"}[kind]
    if fmt != "auto":
        _offline_hub(tmp_path, monkeypatch)
    plain = tmp_path / "plain" / "t.jsonl"
    plain.parent.mkdir()
    plain.write_text(TEXT)
    packed = tmp_path / "ds" / f"train.jsonl{suffix}"
    packed.parent.mkdir()
    packed.write_bytes(data)
    path = packed.parent if fmt == "hub folder" else packed
    option = "workload.format=" + fmt.split()[0]
    assert _compare(plain) == 0
    assert _compare(path, option) == 0
    assert _rows_of(path.parent / "run") == _rows_of(plain.parent / "run")
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    capsys.readouterr()
    for bad, how in ((data[: len(data) * 2 // 3], "cut"), (bytes(damaged), "damaged")):
        # one line naming the file and its line (a damaged xz file was a traceback with
        # format=hub, and a damaged bzip2 file's line named neither)
        path = tmp_path / how / f"t.jsonl{suffix}"
        path.parent.mkdir()
        path.write_bytes(bad)
        assert _compare(path, option) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: experiments.compare: {path}, line ") and err.count("\n") == 1
        assert "row: cannot read the file past this line" in err
        assert not (path.parent / "run").exists()


def test_format_hub_on_a_header_only_parquet_file_says_it_has_no_rows(
    tmp_path: Path, offline_hub: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """As an empty JSONL file does; it quoted pyarrow's ``BatchSize must be greater
    than 0, got 0`` as the first row's fault."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "header.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS[:3]).slice(0, 0), path)
    assert _compare(path, "workload.format=hub") == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: {path}: no rows to tell the layout from\n"
    )


def test_format_hub_does_not_blame_the_first_row_for_a_later_one(
    tmp_path: Path, offline_hub: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A block the library cannot read (an id past 64 bits on line 6, which the
    project's reader takes) is named from its first row on, and the file read without
    format=hub; it said the datasets library "cannot read this row" of line 1."""
    rows = [{**r, "hash_ids": [f"h{h}" for h in r["hash_ids"]]} for r in ROWS[:10]]
    rows[5]["hash_ids"] = [2**70, 1, 2]  # (ints among strings)
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _compare(path, "workload.format=hub") == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: experiments.compare: {path}, line 1, row: the datasets library cannot read "
        "the file from this line on ("
    )
    assert err.endswith("); it reads without workload.format=hub\n") and err.count("\n") == 1
    assert _compare(path) == 0  # as it says


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        # the library said "JSON parse error: Missing a name for object member. in row 5"
        ("bad_json", "line 11, row: not valid JSON (Expecting property name enclosed in "),
        # ... and "Expected object or value", naming nothing
        ("big_id", "line 1, row: the datasets library cannot read the file from this line "),
    ],
)
def test_format_hub_names_a_damaged_data_file_of_a_folder_and_its_line(
    damage: str,
    says: str,
    tmp_path: Path,
    offline_hub: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A folder's data file the datasets library cannot read (a row cut short on line
    11, after a blank line between rows; an id past 64 bits among string ids) is named
    with its line, as a file given alone is."""
    folder = tmp_path / "repo"
    folder.mkdir()
    rows = [json.dumps(row) for row in ROWS[:10]]
    if damage == "bad_json":
        rows[5] = '{"timestamp": 5, bad'
        text = "\n\n".join(rows[:6]) + "\n" + "\n".join(rows[6:]) + "\n"
    else:
        ids = [{**row, "hash_ids": [f"h{h}" for h in row["hash_ids"]]} for row in ROWS[:10]]
        ids[5]["hash_ids"] = [2**70, 1, 2]
        text = "".join(json.dumps(row) + "\n" for row in ids)
    (folder / "train.jsonl").write_text(text)
    assert _compare(folder, "workload.format=hub") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: {folder / 'train.jsonl'}, {says}"), err
    assert err.count("\n") == 1
    if damage == "big_id":
        assert err.endswith(
            "; given alone as workload.path, it reads without workload.format=hub\n"
        )
        assert _compare(folder / "train.jsonl") == 0  # as it says


def test_format_hub_refuses_a_folder_of_csv_files_naming_one(
    tmp_path: Path, offline_hub: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The datasets library reads a CSV file's text as it guesses ("512" as 512): its
    values are not the file's own and cannot be checked as a trace's are."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "train.csv").write_text("timestamp,input_length,output_length\n0,512,2\n")
    assert _compare(folder, "workload.format=hub") == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: {folder / 'train.csv'}: the datasets library reads the "
        "dataset's data files with its 'csv' builder, whose values are its own reading of "
        "them (a column of text read as numbers), not the file's, and cannot be checked as "
        "a trace's are: save the rows as JSONL or parquet\n"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.usefixtures("offline_hub")
def test_format_hub_names_hub_split_for_a_split_the_dataset_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dataset folder of a test split alone, read at the default hub_split=train:
    the library's "Bad split" line reached the user without the option's name."""
    from experiments.make_dataset import make_dataset

    folder = tmp_path / "ds"
    params = {"n_bursts": 2, "burst_requests": 40, "n_decoys": 6}
    make_dataset("bursted_synthetic", folder, 20260721, params=params, progress=False,
                 train_windows=0, test_windows=1)  # fmt: skip
    assert _compare(folder, "workload.format=hub") == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: workload.hub_split='train': the dataset {folder} has "
        "the splits test\n"
    )
