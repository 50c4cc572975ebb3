/* The loops of a snapshot chunk's text-protocol read that numpy runs worst (issue #37): the
 * packet headers of a receive buffer walked one after the other, the 16-byte Arrow binary views
 * of a column's cells, and DATE / DATETIME / TIMESTAMP text parsed into days or microseconds. Each function is the twin of a pure-Python one, which stays
 * the reference (result_set.TextResultReader._frame, cells.as_binary_view): the property tests
 * in tests/unit/test_snapshot_cells.py run both and compare.
 *
 * frame(buffer, start, end) -> (offsets, next)
 *     ``offsets``: bytes holding the little-endian int64 payload offsets of the whole packets
 *     found from ``start`` (each a 4-byte header, its 3-byte length, then the payload), ``next``:
 *     where the first packet not wholly inside ``buffer[:end]`` starts.
 *
 * views(data, starts, lengths) -> bytes
 *     ``starts`` and ``lengths``: int64 arrays (as buffers) of ``n`` cells in ``data``; 16 bytes
 *     a cell: its length as int32, then its bytes when 12 or fewer (zero after them), else its
 *     first 4 bytes, buffer 0 and its offset (int32 each). A cell of 2 GiB or more, an offset
 *     past 2 GiB or a cell outside ``data`` is a ValueError (the caller checks lengths first).
 *
 * temporal(data, starts, lengths, nulls, width) -> (values, invalid) or None
 *     DATE (``width`` 10: ``YYYY-MM-DD``) or DATETIME / TIMESTAMP (19: ``... hh:mm:ss``, or 21 to
 *     26 with 1 to 6 fraction digits) cells: ``values`` the int64 days since 1970-01-01 (a date)
 *     or microseconds since 1970-01-01 00:00 (the others), 0 for NULL and invalid cells;
 *     ``invalid`` one byte a cell, 1 where a non-NULL cell is no calendar date (year 0, month
 *     or day 0 or out of range: zero dates). None when a non-NULL cell is not ``width`` bytes of
 *     digits and separators: the caller's Python path (decode._temporal_values) then raises
 *     the typed error it would have raised. Twin of decode._temporal_values and _calendar_days.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *frame(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &start, &end)) return NULL;
    if (start < 0 || end < start || end > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "frame: start and end must lie inside the buffer");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    /* at most one packet per 4 bytes */
    Py_ssize_t most = (end - start) / 4;
    PyObject *out = PyBytes_FromStringAndSize(NULL, most * 8);
    if (out == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int64_t *offsets = (int64_t *)PyBytes_AS_STRING(out);
    Py_ssize_t count = 0, pos = start;
    while (pos + 4 <= end) {
        Py_ssize_t following =
            pos + 4 + ((Py_ssize_t)p[pos] | (Py_ssize_t)p[pos + 1] << 8 | (Py_ssize_t)p[pos + 2] << 16);
        if (following > end) break;
        offsets[count++] = (int64_t)(pos + 4);
        pos = following;
    }
    PyBuffer_Release(&buf);
    if (_PyBytes_Resize(&out, count * 8) < 0) return NULL;
    return Py_BuildValue("(Nn)", out, pos);
}

static int int64_buffer(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len % 8 != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "views: %s is not an int64 array", what);
        return -1;
    }
    return 0;
}

/* A column's cells: the block's bytes, and int64 starts and lengths (all released on failure). */
typedef struct {
    Py_buffer data, starts, lengths;
} CellBuffers;

static int cell_buffers(PyObject *data, PyObject *starts, PyObject *lengths, CellBuffers *out) {
    if (PyObject_GetBuffer(data, &out->data, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (int64_buffer(starts, &out->starts, "starts") < 0) {
        PyBuffer_Release(&out->data);
        return -1;
    }
    if (int64_buffer(lengths, &out->lengths, "lengths") < 0) {
        PyBuffer_Release(&out->starts);
        PyBuffer_Release(&out->data);
        return -1;
    }
    return 0;
}

static void release_cells(CellBuffers *cells) {
    PyBuffer_Release(&cells->lengths);
    PyBuffer_Release(&cells->starts);
    PyBuffer_Release(&cells->data);
}

static PyObject *views(PyObject *self, PyObject *args) {
    PyObject *data_obj, *starts_obj, *lengths_obj;
    if (!PyArg_ParseTuple(args, "OOO", &data_obj, &starts_obj, &lengths_obj)) return NULL;
    CellBuffers cells;
    if (cell_buffers(data_obj, starts_obj, lengths_obj, &cells) < 0) return NULL;
    Py_buffer data = cells.data, starts = cells.starts, lengths = cells.lengths;
    PyObject *out = NULL;
    Py_ssize_t n = starts.len / 8;
    if (lengths.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "views: starts and lengths differ in length");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 16);
    if (out == NULL) goto done;
    unsigned char *v = (unsigned char *)PyBytes_AS_STRING(out);
    memset(v, 0, (size_t)n * 16);
    const unsigned char *bytes = (const unsigned char *)data.buf;
    const int64_t *s = (const int64_t *)starts.buf, *l = (const int64_t *)lengths.buf;
    for (Py_ssize_t i = 0; i < n; i++, v += 16) {
        int64_t start = s[i], length = l[i];
        if (start < 0 || length < 0 || length >= ((int64_t)1 << 31) || start > data.len ||
            length > data.len - start || (length > 12 && start >= ((int64_t)1 << 31))) {
            PyErr_Format(PyExc_ValueError, "views: cell %zd (at %lld, %lld bytes) is outside "
                         "the block or too long for a view", i, (long long)start, (long long)length);
            Py_CLEAR(out);
            goto done;
        }
        int32_t size = (int32_t)length;
        memcpy(v, &size, 4);
        if (length <= 12) {
            memcpy(v + 4, bytes + start, (size_t)length);
        } else {
            int32_t offset = (int32_t)start;
            memcpy(v + 4, bytes + start, 4); /* the prefix; buffer index 0 (already zero) */
            memcpy(v + 12, &offset, 4);
        }
    }
done:
    release_cells(&cells);
    return out;
}

static const int DAYS_IN_MONTH[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

/* ``count`` digits at ``p``, or -1 when one of them is not a digit */
static int64_t digits(const unsigned char *p, int count) {
    int64_t value = 0;
    for (int k = 0; k < count; k++) {
        unsigned d = (unsigned)p[k] - '0';
        if (d > 9) return -1;
        value = value * 10 + d;
    }
    return value;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

/* days since 1970-01-01 (proleptic Gregorian), H. Hinnant's days_from_civil */
static int64_t days_from_civil(int64_t year, int64_t month, int64_t day) {
    int64_t y = year - (month <= 2);
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* one cell: 0 parsed (``*value``, ``*invalid`` set), -1 malformed */
static int temporal_cell(const unsigned char *p, Py_ssize_t width, int64_t *value, char *invalid) {
    static const unsigned char separator[6] = {'-', '-', ' ', ':', ':', '.'};
    static const int at[6] = {4, 7, 10, 13, 16, 19};
    for (int k = 0; k < 6 && at[k] < width; k++)
        if (p[at[k]] != separator[k]) return -1;
    int64_t year = digits(p, 4), month = digits(p + 5, 2), day = digits(p + 8, 2);
    if (year < 0 || month < 0 || day < 0) return -1;
    int64_t hour = 0, minute = 0, second = 0, fraction = 0;
    if (width > 10) {
        hour = digits(p + 11, 2), minute = digits(p + 14, 2), second = digits(p + 17, 2);
        if (hour < 0 || minute < 0 || second < 0) return -1;
        if (width > 19) {
            int fsp = (int)(width - 20);
            fraction = digits(p + 20, fsp);
            if (fraction < 0) return -1;
            for (int k = fsp; k < 6; k++) fraction *= 10;
        }
    }
    int leap = (year % 4 == 0) && (year % 100 != 0 || year % 400 == 0);
    int month_ok = month >= 1 && month <= 12;
    int64_t limit = month_ok ? DAYS_IN_MONTH[month] + (leap && month == 2) : 0;
    if (!(year >= 1 && month_ok && day >= 1 && day <= limit)) {
        *value = 0;
        *invalid = 1;
        return 0;
    }
    int64_t days = days_from_civil(year, month, day);
    *invalid = 0;
    if (width == 10)
        *value = days;
    else
        *value = days * 86400000000LL + ((hour * 60 + minute) * 60 + second) * 1000000LL + fraction;
    return 0;
}

static PyObject *temporal(PyObject *self, PyObject *args) {
    PyObject *data_obj, *starts_obj, *lengths_obj, *nulls_obj;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOOOn", &data_obj, &starts_obj, &lengths_obj, &nulls_obj, &width))
        return NULL;
    if (!(width == 10 || width == 19 || (width >= 21 && width <= 26))) {
        PyErr_SetString(PyExc_ValueError, "temporal: width must be 10, 19 or 21 to 26");
        return NULL;
    }
    CellBuffers cells;
    Py_buffer nulls;
    if (cell_buffers(data_obj, starts_obj, lengths_obj, &cells) < 0) return NULL;
    if (PyObject_GetBuffer(nulls_obj, &nulls, PyBUF_C_CONTIGUOUS) < 0) {
        release_cells(&cells);
        return NULL;
    }
    Py_buffer data = cells.data, starts = cells.starts, lengths = cells.lengths;
    PyObject *result = NULL, *values = NULL, *invalid = NULL;
    Py_ssize_t n = starts.len / 8;
    if (lengths.len / 8 != n || nulls.len != n) {
        PyErr_SetString(PyExc_ValueError, "temporal: starts, lengths and nulls differ in length");
        goto done;
    }
    values = PyBytes_FromStringAndSize(NULL, n * 8);
    invalid = PyBytes_FromStringAndSize(NULL, n);
    if (values == NULL || invalid == NULL) goto done;
    int64_t *v = (int64_t *)PyBytes_AS_STRING(values);
    char *bad = PyBytes_AS_STRING(invalid);
    const unsigned char *bytes = (const unsigned char *)data.buf;
    const int64_t *s = (const int64_t *)starts.buf, *l = (const int64_t *)lengths.buf;
    const char *null = (const char *)nulls.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (null[i]) {
            v[i] = 0;
            bad[i] = 0;
            continue;
        }
        if (l[i] != width || s[i] < 0 || s[i] > data.len - width ||
            temporal_cell(bytes + s[i], width, &v[i], &bad[i]) < 0) {
            result = Py_None; /* malformed: the Python path raises its typed error */
            Py_INCREF(result);
            goto done;
        }
    }
    result = PyTuple_Pack(2, values, invalid);
done:
    Py_XDECREF(values);
    Py_XDECREF(invalid);
    PyBuffer_Release(&nulls);
    release_cells(&cells);
    return result;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS, "Payload offsets of the whole packets buffered, and where the rest starts."},
    {"views", views, METH_VARARGS, "16-byte Arrow binary views of cells."},
    {"temporal", temporal, METH_VARARGS, "DATE / DATETIME cells as days or microseconds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_textcells",
    "Text-protocol packet framing and Arrow binary views in C (binlake.snapshot).", -1, methods,
};

PyMODINIT_FUNC PyInit__textcells(void) { return PyModule_Create(&module); }
