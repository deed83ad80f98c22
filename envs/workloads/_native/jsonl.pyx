# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Mooncake JSONL lines read in C: :func:`collect` and :func:`place`, the compiled twins
of ``collect_rows`` and ``place_rows`` in envs/workloads/readers/base.py.

A line is read here only when it is one JSON object of the plain Mooncake layout:
the keys ``timestamp``, ``input_length``, ``output_length`` and ``hash_ids`` (and
``request_id``), each at most once, integers of at most 18 digits, a non-empty
list of them for ``hash_ids``, a printable-ASCII string without escapes for
``request_id``, JSON blanks between tokens, and values that pass the reference's
checks (``input_length >= 1``, ``output_length >= 0``, the block count, the
context). Such a line means one thing to every JSON parser, so the request made
here is the one the reference makes. Any other line (a float, a big integer, an
escape, another key, a blank line, a malformed or failing row) goes to the
reference: ``rows.row_of`` parses it and ``stream.take`` checks it, skips it or
raises its error. Block hashes are chained as C integers
(``BlockChainer.chain_ints``), so a known prefix costs no int object a block.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.math cimport INFINITY, floor
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp

from envs.sim._native.chainer cimport BlockChainer

cdef enum:
    MAX_DIGITS = 18  # any integer of 18 digits fits in 64 bits

cdef enum:
    TIMESTAMP = 1
    INPUT = 2
    OUTPUT = 4
    HASHES = 8
    REQUEST_ID = 16


cdef struct Line:
    long long time
    long long input_tokens
    long long output_tokens
    Py_ssize_t n_hashes
    const char* request_id
    Py_ssize_t request_id_len
    int seen


cdef struct Hashes:
    long long* data
    Py_ssize_t capacity


# The readers below rely on a bytes object's buffer ending in a NUL byte one past its
# size (CPython's guarantee): every loop stops at a byte it does not expect, so none
# reads past it, and a line with a NUL in it is simply not the plain layout.


cdef inline Py_ssize_t _blank(const char* s, Py_ssize_t i) noexcept nogil:
    while s[i] == b' ' or s[i] == b'\t' or s[i] == b'\n' or s[i] == b'\r':
        i += 1
    return i


cdef inline Py_ssize_t _integer(const char* s, Py_ssize_t i, long long* out) noexcept nogil:
    """A JSON integer of at most 18 digits at ``s[i]``: its end, or -1 (anything else,
    a fraction or an exponent included)."""
    cdef bint negative = s[i] == b'-'
    cdef unsigned long long value = 0  # wraps past 20 digits (defined), refused below
    cdef unsigned int digit
    cdef Py_ssize_t first
    if negative:
        i += 1
    first = i
    while True:
        digit = <unsigned char>s[i] - 48
        if digit > 9:
            break
        value = value * 10 + digit
        i += 1
    if i == first or i - first > MAX_DIGITS or (s[first] == b'0' and i - first > 1):
        return -1  # no digit, too many, or a leading zero (not JSON)
    if s[i] == b'.' or s[i] == b'e' or s[i] == b'E':
        return -1  # a number that is not an integer
    out[0] = -<long long>value if negative else <long long>value
    return i


cdef inline bint _key(const char* s, Py_ssize_t length, const char* name, Py_ssize_t size) noexcept nogil:
    return length == size and memcmp(s, name, size) == 0


cdef int _parse(const char* s, Py_ssize_t n, Line* line, Hashes* hashes) except -1:
    """Read one line of the plain layout (``n`` bytes at ``s``, NUL after them) into
    ``line`` and ``hashes``: 1, or 0 when the line is anything else (the reference
    reads it)."""
    cdef Py_ssize_t i = _blank(s, 0), start, length, count
    cdef int field
    cdef long long value
    cdef long long* grown
    line.seen = 0
    line.output_tokens = 1
    if s[i] != b'{':
        return 0
    i += 1
    while True:
        i = _blank(s, i)
        if s[i] != b'"':
            return 0
        i += 1
        start = i
        while s[i] != b'"' and s[i] != b'\\' and s[i] != 0:
            i += 1
        if s[i] != b'"':
            return 0
        length = i - start
        if _key(s + start, length, b"timestamp", 9):
            field = TIMESTAMP
        elif _key(s + start, length, b"input_length", 12):
            field = INPUT
        elif _key(s + start, length, b"output_length", 13):
            field = OUTPUT
        elif _key(s + start, length, b"hash_ids", 8):
            field = HASHES
        elif _key(s + start, length, b"request_id", 10):
            field = REQUEST_ID
        else:
            return 0
        if line.seen & field:
            return 0  # a key twice
        line.seen |= field
        i = _blank(s, i + 1)
        if s[i] != b':':
            return 0
        i = _blank(s, i + 1)
        if field == TIMESTAMP:
            i = _integer(s, i, &line.time)
        elif field == INPUT:
            i = _integer(s, i, &line.input_tokens)
        elif field == OUTPUT:
            i = _integer(s, i, &line.output_tokens)
        elif field == REQUEST_ID:
            if s[i] != b'"':
                return 0
            i += 1
            start = i
            while 32 <= s[i] <= 126 and s[i] != b'"' and s[i] != b'\\':
                i += 1
            if s[i] != b'"':
                return 0
            line.request_id = s + start
            line.request_id_len = i - start
            i += 1
        else:  # hash_ids
            if s[i] != b'[':
                return 0
            count = 0
            while True:
                i = _integer(s, _blank(s, i + 1), &value)
                if i < 0:
                    return 0  # an empty list or an item that is not a plain integer
                if count == hashes.capacity:
                    grown = <long long*>realloc(hashes.data, 2 * hashes.capacity * sizeof(long long))
                    if grown == NULL:
                        raise MemoryError()
                    hashes.data = grown
                    hashes.capacity *= 2
                hashes.data[count] = value
                count += 1
                if s[i] != b',':  # the common case: no blank before it
                    i = _blank(s, i)
                    if s[i] == b']':
                        i += 1
                        break
                    if s[i] != b',':
                        return 0
            line.n_hashes = count
        if i < 0:
            return 0
        i = _blank(s, i)
        if s[i] == b',':
            i += 1
            continue
        if s[i] == b'}':
            break
        return 0
    if _blank(s, i + 1) != n:
        return 0
    return (line.seen & (TIMESTAMP | INPUT | HASHES)) == (TIMESTAMP | INPUT | HASHES)


cdef inline bint _passes(Line* line, long long block_tokens, bint strict, long long max_context) noexcept nogil:
    """The reference's checks of a row (``input_length >= 1``, ``output_length >= 0``,
    the block count, the context), on a parsed line; ``output_tokens`` becomes >= 1."""
    if line.input_tokens < 1 or line.output_tokens < 0:
        return False
    if line.output_tokens == 0:
        line.output_tokens = 1  # prefill makes the first token
    if strict and not (
        line.input_tokens // block_tokens
        <= line.n_hashes
        <= (line.input_tokens + block_tokens - 1) // block_tokens
    ):
        return False
    return max_context < 0 or line.input_tokens + line.output_tokens <= max_context


REQUEST_FIELDS = (
    "index", "request_id", "arrival_s", "input_tokens", "output_tokens", "blocks",
    "tenant", "group_id", "job_kind", "source", "chat_id", "parent_chat_id",
)
"""The fields :func:`_request` sets, in ``Request``'s order (the caller checks them
against the dataclass's before it lets this module run)."""

cdef tuple _NO_ARGS = ()


cdef object _request(
    type kind, object request_id, long long input_tokens, long long output_tokens,
    tuple blocks, object tenant,
):
    """``kind(0, request_id, 0.0, input_tokens, output_tokens, blocks, tenant)`` for
    ``Request`` (a slotted dataclass), without running its ``__init__`` in Python:
    made as ``object.__new__(kind)`` makes it, then every field set, the later ones
    to their default ""."""
    cdef object request = (<PyTypeObject*>kind).tp_new(kind, <PyObject*>_NO_ARGS, NULL)
    request.index = 0
    request.request_id = request_id
    request.arrival_s = 0.0
    request.input_tokens = input_tokens
    request.output_tokens = output_tokens
    request.blocks = blocks
    request.tenant = tenant
    request.group_id = ""
    request.job_kind = ""
    request.source = ""
    request.chat_id = ""
    request.parent_chat_id = ""
    return request


def collect(rows, stream, BlockChainer chainer, str namespace, type request_type, make_request, note):
    """The requests of a Mooncake JSONL file, with each one's time (in the file's unit)
    and line: ``collect_rows`` of envs/workloads/readers/base.py, row for row.

    ``rows``: the file's :class:`JsonlRows`; ``stream``: the read's ``RowStream``
    (options, report, block size, and the reference's ``take`` of a row);
    ``make_request`` and ``note`` (an out-of-order row) are the reference's."""
    report = stream.report
    options = stream.options
    cdef long long block_tokens = stream.block_tokens
    cdef bint strict = options.strict_block_count
    cdef long long max_context = -1 if options.max_context_tokens is None else options.max_context_tokens
    cdef long long max_rows = -1 if options.max_rows is None else options.max_rows
    cdef Py_ssize_t line_no = 0, fast_read = 0, k = 0
    cdef double time, last = -INFINITY
    cdef Line line
    cdef Hashes hashes
    cdef bytes raw
    cdef list requests = []
    cdef array.array times = array.array("d")
    cdef array.array lines = array.array("q")
    take = stream.take
    row_of = rows.row_of
    read_errors = rows.READ_ERRORS
    hashes.capacity = 64
    hashes.data = <long long*>malloc(hashes.capacity * sizeof(long long))
    if hashes.data == NULL:
        raise MemoryError()
    try:
        with rows.open_bytes() as handle:
            lines_of = iter(handle)
            while True:
                try:  # the lines of rows.raw_lines(), without a generator between
                    raw = next(lines_of)
                except StopIteration:
                    break
                except read_errors as error:
                    raise rows.read_error(line_no + 1, error) from None
                line_no += 1
                if _parse(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), &line, &hashes) and _passes(
                    &line, block_tokens, strict, max_context
                ):
                    if max_rows >= 0 and report.rows_read + fast_read >= max_rows:
                        break
                    fast_read += 1
                    time = <double>line.time
                    if time < last:
                        note(line_no, time, last)
                    else:
                        last = time
                    request = _request(
                        request_type,
                        PyUnicode_DecodeASCII(line.request_id, line.request_id_len, NULL)
                        if line.seen & REQUEST_ID
                        else str(line_no),
                        line.input_tokens,
                        line.output_tokens,
                        chainer.chain_ints(hashes.data, line.n_hashes, namespace),
                        namespace,
                    )
                else:
                    row = row_of(raw, line_no)
                    if row is None:
                        continue  # a blank line
                    if max_rows >= 0 and report.rows_read + fast_read >= max_rows:
                        break
                    taken = take(line_no, row)
                    if taken is None:
                        continue  # skipped (skip_bad_rows)
                    parsed = taken[1]
                    time = parsed.time
                    if time < last:
                        note(line_no, time, last)
                    else:
                        last = time
                    request = make_request(parsed, 0.0, chainer, namespace)
                requests.append(request)
                array.resize_smart(times, k + 1)
                array.resize_smart(lines, k + 1)
                times.data.as_doubles[k] = time
                lines.data.as_longlongs[k] = line_no
                k += 1
    finally:
        free(hashes.data)
        report.rows_read += fast_read
    return requests, times, lines


PLACES_INTEGERS_ONLY = True
"""Marks a build whose :func:`place` leaves every time with a fraction to the
reference (``compiled.place_rows`` uses no other)."""


def place(list requests, array.array times, double origin, double units_per_s):
    """``place_rows``' common case: when ``origin`` and every time are integers (in
    the file's unit; ``rebased`` takes their difference as it is) and every row
    arrives a finite, non-negative time after ``origin``, set each request's
    ``arrival_s`` and ``index`` and return True; otherwise change nothing and
    return False (the reference then rounds decimals to their places, or says
    which row is wrong)."""
    cdef Py_ssize_t i, n = len(requests)
    cdef double arrival_s
    cdef double* t = times.data.as_doubles
    if floor(origin) != origin:
        return False
    for i in range(n):
        arrival_s = (t[i] - origin) / units_per_s
        if not (0.0 <= arrival_s < INFINITY) or floor(t[i]) != t[i]:
            return False
    for i in range(n):
        request = requests[i]
        request.arrival_s = (t[i] - origin) / units_per_s
        request.index = i
    return True
