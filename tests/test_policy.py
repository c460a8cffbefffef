"""One validation point: every count, budget, tolerance, layer and path a visitor sends, and bounded reads."""
import math
import os

import pytest

from app.core.ground import policy
from app.core.ground.data import DataError, check_file, load_dataset, read_table
from app.core.ground.errors import InputError


@pytest.fixture()
def hosted(monkeypatch):
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")


@pytest.mark.parametrize("bad", [-1, 0, -10**9, 2.5, math.nan, math.inf, -math.inf, "abc", "1e999", True, [], {}])
def test_a_count_refuses_what_is_not_a_whole_number_of_one_or_more(bad):
    with pytest.raises(InputError, match=r"^limit: .*give a whole number from 1 to 500$"):
        policy.count("limit", bad, cap=500)


def test_a_count_refuses_more_than_the_cap_and_fills_the_default():
    """Above the cap a count is refused like one below 1, naming the range ("1e12" was taken as the cap); a size
    of work (`clamp`) is lowered to it; an empty field takes the default, at most the cap."""
    for big, shown in ((10**9, "1,000,000,000"), ("1e12", "1,000,000,000,000"), ("1e300", "1e300"), (501, "501")):
        with pytest.raises(InputError, match=rf"^limit: {shown} is more than this server takes; give a whole "
                                             r"number from 1 to 500$"):
            policy.count("limit", big, cap=500)
    assert policy.count("limit", 10**9, cap=500, clamp=True) == 500 and policy.count("limit", 500, cap=500) == 500
    assert policy.count("limit", "7", cap=500) == 7 and policy.count("limit", 7.0, cap=500) == 7
    assert policy.count("limit", None, cap=500, default=50) == 50
    assert policy.count("limit", None, cap=500, default=1000) == 500  # a default above the cap: the cap
    assert policy.count("limit", "  ", cap=500) == 500  # empty and no default: the cap
    # the bug this replaces: min(limit or cap, cap) with -1, then examples[:n], ran all rows but one
    rows = list(range(871))
    assert len(rows[: policy.count("limit", 50, cap=50)]) == 50


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf, "soon", None])
def test_a_time_limit_must_be_a_positive_finite_number(bad):
    with pytest.raises(InputError, match=r"^time_limit: .*above 0 and at most 30"):
        policy.number("time_limit", bad, low=0, high=30)
    assert policy.number("time_limit", 1e9, low=0, high=30) == 30
    with pytest.raises(InputError, match="at most 30"):
        policy.number("time_limit", 31, low=0, high=30, clamp=False)


def test_tolerance_and_layer_ranges(hosted):
    assert policy.tolerance("tolerance", "1e-3") == 1e-3
    for bad, words in [("1e-5", "below this server's smallest, 0.0001"), (0, "positive, finite"),
                       ("nan", "positive, finite"), (2, "above 1"), ("x", "not a number")]:
        with pytest.raises(InputError, match=words):
            policy.tolerance("tolerance", bad)
    assert policy.integer("layer", -1.0, low=-1, high=2) == -1
    for bad in (3, -2, 1.5, math.nan):
        with pytest.raises(InputError, match="layer: .* from -1 to 2"):
            policy.integer("layer", bad, low=-1, high=2)


def test_hosted_caps_are_lower(monkeypatch):
    local = policy.limits()
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    hosted = policy.limits()
    for key in ("max_examples", "max_attack_examples", "max_query_budget", "max_attack_seconds",
                "max_checklist_sample", "max_file_bytes", "request_seconds", "max_chars"):
        assert hosted[key] < local[key], key
    monkeypatch.setenv("ALBERT_LENS_MAX_FILE_MB", "-3")
    with pytest.raises(InputError, match="ALBERT_LENS_MAX_FILE_MB: '-3' must be a positive number"):
        policy.limits()


def test_binding_a_public_address_takes_hosted_mode_or_the_operators_word(monkeypatch):
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        policy.public_bind_allowed(host, False)
    with pytest.raises(InputError, match="--host 0.0.0.0: .*ALBERT_LENS_HOSTED=1.*--unsafe-public"):
        policy.public_bind_allowed("0.0.0.0", False)
    policy.public_bind_allowed("0.0.0.0", True)
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    policy.public_bind_allowed("0.0.0.0", False)


def test_the_cli_refuses_a_public_bind_before_loading_anything(capsys):
    from app.cli import main

    assert main(["app", "--host", "0.0.0.0", "--pair", "offline"]) == 2
    assert "--unsafe-public" in capsys.readouterr().err
    assert main(["attack", "--pair", "offline", "--recipe", "deepwordbug", "--dataset", "x", "--n", "-1"]) == 2
    assert "--n: -1 is too small; give a whole number of 1 or more" in capsys.readouterr().err


# ------------------------------------------------------------------ bounded reads


@pytest.fixture()
def no_hang():
    """Opening a FIFO blocks until a writer comes: were the check broken, the test fails after 10 s, not never."""
    import signal

    def alarm(*_):
        raise TimeoutError("blocked opening a file that is not a regular file")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_devices_fifos_and_system_files_are_never_opened(tmp_path, no_hang):
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)  # opening it would block forever
    link = tmp_path / "zero.csv"
    link.symlink_to("/dev/zero")  # an allowed suffix, a device behind it
    environ = tmp_path / "env.csv"
    environ.symlink_to("/proc/self/environ")  # a regular file of size 0 with the server's secrets
    for path in (fifo, link, environ):
        with pytest.raises(DataError, match="not a regular file"):
            load_dataset(str(path))
        with pytest.raises(DataError, match="not a regular file"):
            check_file(path)
    for path in ("/dev/zero", "/dev/urandom", "/proc/self/environ"):
        with pytest.raises(DataError, match="not a regular file|unsupported file type"):
            load_dataset(path)
    with pytest.raises(DataError, match="unsupported file type ''"):
        read_table("/dev/zero")  # the suffix is checked before the file is touched


def test_size_is_checked_before_reading(tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:  # sparse: 3 GB on paper, nothing on disk; reading it would take minutes
        fh.truncate(3 * 2**30)
    with pytest.raises(DataError, match=r"3,072.0 MB; the limit here is 1,024 MB"):
        check_file(big)
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    small = tmp_path / "small.csv"
    small.write_text("text,label\n" + "a fine film,1\n" * 2_000_000)
    with pytest.raises(DataError, match="the limit here is 20 MB"):
        load_dataset(str(small))


def test_rows_are_counted_while_streaming(tmp_path):
    """The first `limit` rows are parsed and no more: a malformed row past them is never reached."""
    f = tmp_path / "rows.tsv"
    f.write_text("sentence\tlabel\n" + "".join(f"row {i}\t1\n" for i in range(5)) + "broken row\n")
    assert [e.text for e in read_table(f, limit=3).examples] == ["row 0", "row 1", "row 2"]
    with pytest.raises(DataError, match="line 7: expected 2 columns, found 1"):
        read_table(f)
    sst = load_dataset(str(f.parent / "rows.tsv"), limit=2)
    assert len(sst) == 2


def test_a_visitors_rows_are_held_to_the_text_cap(hosted, tiny_pair, tmp_path, monkeypatch):
    from app.core import api

    monkeypatch.setattr(policy, "_READABLE", [])
    policy.allow_reads_under(tmp_path)
    f = tmp_path / "huge.csv"
    f.write_text("text,label\nshort,1\n" + "x" * 1_000_000 + ",0\n")
    with pytest.raises(InputError, match="dataset: huge, example 2: field 'sentence' is 1,000,000 characters long; "
                                         "the limit here is 2,000"):
        api.resolve_dataset(tiny_pair, str(f))
    assert len(api.resolve_dataset(tiny_pair, str(f), 1)) == 1  # the rows asked for are all short
    assert len(api.resolve_dataset(tiny_pair, str(f), None, visitor=False)) == 2  # the operator's own data


def test_a_name_the_file_system_refuses_is_a_message(tiny_pair):
    from app.core import api

    with pytest.raises(DataError, match="dataset: .* can't be opened|no such file"):
        api.resolve_dataset(tiny_pair, "a" * 3000 + ".csv")
    with pytest.raises(InputError, match="dataset: not a name or path"):
        api.resolve_dataset(tiny_pair, "a" * 5000)


def test_an_error_names_an_upload_by_its_file_name_not_its_server_path(monkeypatch, tmp_path):
    """Every upload error named the server's upload folder (`/tmp/.../<sha256>/empty.csv: empty file`): an
    uploaded file is named by its file name, as the visitor chose it, hosted or not; hosted, a path under any of
    the server's folders is cut to the file's name too; the operator's own files keep the whole path."""
    uploads = tmp_path / "gradio"
    (uploads / "9f2c").mkdir(parents=True)
    empty = uploads / "9f2c" / "empty.csv"
    empty.write_text("")
    monkeypatch.setattr(policy, "_READABLE", [])
    monkeypatch.setattr(policy, "_UPLOADS", set())
    own = tmp_path / "mine" / "rows.csv"
    assert policy.public_message(f"{own}: empty file") == f"{own}: empty file"
    policy.allow_reads_under(uploads)
    with pytest.raises(DataError) as err:
        load_dataset(empty)
    message = str(err.value)
    assert str(empty) in message
    shown = policy.public_message(message)  # not hosted: the upload by its name all the same
    assert shown.startswith("empty.csv") and str(uploads) not in shown and "9f2c" not in shown, shown
    assert policy.public_message(f"{own}: empty file") == f"{own}: empty file"  # not an upload: as it was
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    shown = policy.public_message(message)
    assert shown.startswith("empty.csv") and str(uploads) not in shown and "9f2c" not in shown, shown
    shared = policy.SHARED_DATA.resolve() / "glue" / "sst2" / "dev.tsv"
    assert policy.public_message(f"{shared}, line 3: bad 'x'") == "dev.tsv, line 3: bad 'x'"
    assert policy.public_message("limit: 0 is too small") == "limit: 0 is too small"  # no path: untouched


# ------------------------------------------------------------------ fuzzing the validation point (issue 41)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30) | st.binary(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=ANYTHING)
def test_fuzz_every_check_answers_a_valid_value_or_names_its_field(value):
    """Whatever a client sends where a count, an index or a number goes: a value in the allowed range or an
    InputError naming the field, never another exception."""
    for check, ok in (
        (lambda v: policy.count("limit", v, cap=500), lambda x: isinstance(x, int) and 1 <= x <= 500),
        (lambda v: policy.integer("layer", v, low=-1, high=12), lambda x: isinstance(x, int) and -1 <= x <= 12),
        (lambda v: policy.number("time_limit", v, low=0, high=30), lambda x: math.isfinite(x) and 0 < x <= 30),
    ):
        try:
            out = check(value)
        except InputError as exc:
            assert str(exc).split(":")[0] in ("limit", "layer", "time_limit"), str(exc)
        else:
            assert ok(out), (value, out)
