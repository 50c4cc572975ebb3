/* The loops of a snapshot chunk's text-protocol read that numpy cannot run column-wise (issue
 * #37): the packet headers of a receive buffer walked one after the other, and the 16-byte Arrow
 * binary views of a column's cells. Each function is the twin of a pure-Python one, which stays
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

static PyObject *views(PyObject *self, PyObject *args) {
    PyObject *data_obj, *starts_obj, *lengths_obj;
    if (!PyArg_ParseTuple(args, "OOO", &data_obj, &starts_obj, &lengths_obj)) return NULL;
    Py_buffer data, starts, lengths;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (int64_buffer(starts_obj, &starts, "starts") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (int64_buffer(lengths_obj, &lengths, "lengths") < 0) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&data);
        return NULL;
    }
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
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    return out;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS, "Payload offsets of the whole packets buffered, and where the rest starts."},
    {"views", views, METH_VARARGS, "16-byte Arrow binary views of cells."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_textcells",
    "Text-protocol packet framing and Arrow binary views in C (binlake.snapshot).", -1, methods,
};

PyMODINIT_FUNC PyInit__textcells(void) { return PyModule_Create(&module); }
