/* Events of a binlog in memory framed in C (issue #37): the native twin of EventStream's step.
 *
 * A Framer is made by binlake.binlog.stream for one format context. framer.frame(buf, pos)
 * takes the event at pos only when everything about it is as it should be: a whole common
 * header, a size from 19 bytes to MAX_EVENT_SIZE that fits in buf, not the place where the
 * FORMAT_DESCRIPTION must be, not a FORMAT_DESCRIPTION, and (with CRC32) room for the trailer
 * and a CRC32 that matches (zlib-ng's crc32, called over 4 KiB pieces as header.crc32 does, so
 * the GIL is kept). It then returns:
 *
 * - for a rows event whose post-header the context describes (the rows_types given) and whose
 *   body frames (table id, flags, v2 extra data, column count, bitmaps within the body): the
 *   whole BinlogEvent, with its RowsEvent payload, what decode_event gives for it;
 * - the same for a transaction's XID, ANNOTATE_ROWS and MariaDB GTID (with no commit id and no
 *   XA) in their usual shapes, as codec.EventFramer decodes them in place (when their types
 *   are given), and for a TABLE_MAP whose body the EventFramer decoded before (its
 *   table_maps, when given);
 * - for any other event: its EventHeader, CRC32 checked; the caller decodes the payload;
 * - None for anything else, where the caller runs the reference step, which raises the
 *   precise typed error (or decodes what only it decodes).
 *
 * C never raises a format error of its own: anything doubtful goes back to the Python step.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_LEN 19
#define CHECKSUM_LEN 4
#define MAX_EVENT_SIZE (1u << 30)
#define FORMAT_DESCRIPTION 15
#define CRC_PIECE 4096
#define XID 16
#define TABLE_MAP 19
#define ANNOTATE_ROWS 160
#define MARIADB_GTID 162
#define MARIA_GTID_BODY 19 /* seq_no, domain_id, flags2 and the padding, no more fields */

/* The fields of the payloads made here (the names of their dataclasses' attributes). */
enum {
    F_TYPE_CODE, F_KIND, F_VERSION, F_TABLE_ID, F_FLAGS, F_EXTRA_DATA, F_COLUMN_COUNT,
    F_PRESENT, F_PRESENT_AFTER, F_ROWS, F_XID, F_QUERY, F_SEQ_NO, F_DOMAIN_ID, F_FLAGS2,
    F_COMMIT_ID, F_XA_XID, F_EXTRA, FIELDS
};
static const char *const field_names[FIELDS] = {
    "type_code", "kind", "version", "table_id", "flags", "extra_data", "column_count",
    "columns_present", "columns_present_after", "rows", "xid", "query", "seq_no", "domain_id",
    "flags2", "commit_id", "xa_xid", "extra",
};
static const int rows_fields[] = {
    F_TYPE_CODE, F_KIND, F_VERSION, F_TABLE_ID, F_FLAGS, F_EXTRA_DATA, F_COLUMN_COUNT,
    F_PRESENT, F_PRESENT_AFTER, F_ROWS,
};
static const int xid_fields[] = {F_XID, F_TYPE_CODE};
static const int annotate_fields[] = {F_QUERY, F_TYPE_CODE};
static const int gtid_fields[] = {
    F_SEQ_NO, F_DOMAIN_ID, F_FLAGS2, F_COMMIT_ID, F_XA_XID, F_EXTRA, F_TYPE_CODE,
};
#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

typedef struct {
    PyObject_HEAD
    PyObject *crc32;           /* zlib-ng's crc32(data, value) */
    PyTypeObject *header_type; /* EventHeader (a named tuple of 6) */
    PyTypeObject *event_type;  /* BinlogEvent (a named tuple of 4) */
    PyTypeObject *rows_type;   /* RowsEvent */
    PyTypeObject *xid_type, *annotate_type, *gtid_type; /* XidEvent, AnnotateRowsEvent, ... */
    long gtid_more;            /* GTID flags after which more fields follow: not framed here */
    PyObject *table_maps;      /* TABLE_MAP bodies -> their TableMap, kept by EventFramer */
    PyObject *names[FIELDS];
    PyObject *kinds;           /* keeps the kind strings that kind[] borrows */
    PyObject *empty;           /* () : tp_new's arguments */
    Py_ssize_t trailer;        /* 4 with CRC32, else 0 */
    Py_ssize_t first;          /* where the FORMAT_DESCRIPTION must be, or -1 */
    unsigned char id_len[256]; /* a rows type framed here: its table id's length; 0: not one */
    unsigned char version[256];
    unsigned char images[256];
    PyObject *kind[256];
} Framer;

static inline uint32_t
le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t
le_n(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A named tuple of n items, stolen from items (a tuple subclass without a __dict__). */
static PyObject *
named_tuple(PyTypeObject *type, PyObject **items, Py_ssize_t n)
{
    PyObject *t = type->tp_alloc(type, n);
    if (t == NULL) {
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == NULL) {
            Py_DECREF(t);
            for (Py_ssize_t j = i + 1; j < n; j++)
                Py_XDECREF(items[j]);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    return t;
}

/* 1: the CRC32 stored at the end of the event matches its bytes; 0: not; -1: an error. */
static int
crc_matches(Framer *f, const unsigned char *event, Py_ssize_t size)
{
    Py_ssize_t end = size - CHECKSUM_LEN;
    PyObject *value = PyLong_FromLong(0);
    for (Py_ssize_t at = 0; value != NULL && at < end; at += CRC_PIECE) {
        Py_ssize_t n = end - at < CRC_PIECE ? end - at : CRC_PIECE;
        PyObject *piece = PyMemoryView_FromMemory((char *)event + at, n, PyBUF_READ);
        if (piece == NULL) {
            Py_DECREF(value);
            return -1;
        }
        PyObject *args[2] = {piece, value};
        PyObject *next = PyObject_Vectorcall(f->crc32, args, 2, NULL);
        Py_DECREF(piece);
        Py_DECREF(value);
        value = next;
    }
    if (value == NULL)
        return -1;
    unsigned long computed = PyLong_AsUnsignedLong(value);
    Py_DECREF(value);
    if (computed == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return computed == le32(event + end);
}

/* A payload of type made as its dataclass's __init__ makes it (its type's tp_new, then each
 * field set as object.__setattr__ sets it), from n values (stolen; NULL: an error before). */
static PyObject *
make(Framer *f, PyTypeObject *type, const int *fields, PyObject **values, int n)
{
    PyObject *made = NULL;
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok = ok && values[i] != NULL;
    if (ok)
        made = type->tp_new(type, f->empty, NULL);
    for (int i = 0; made != NULL && i < n; i++) {
        if (PyObject_GenericSetAttr(made, f->names[fields[i]], values[i]) < 0)
            Py_CLEAR(made);
    }
    for (int i = 0; i < n; i++)
        Py_XDECREF(values[i]);
    return made;
}

/* The RowsEvent of a rows body, or Py_None (borrowed) when it does not frame; NULL: an error. */
static PyObject *
rows_payload(Framer *f, int code, const unsigned char *body, Py_ssize_t len)
{
    Py_ssize_t id_len = f->id_len[code], p = id_len + 2;
    if (len < p)
        return Py_None;
    Py_ssize_t extra_at = 0, extra_len = 0;
    if (f->version[code] == 2) {
        if (len < p + 2)
            return Py_None;
        Py_ssize_t declared = le16(body + p);
        if (declared < 2 || p + declared > len)
            return Py_None;
        extra_at = p + 2, extra_len = declared - 2, p += declared;
    }
    if (p >= len)
        return Py_None;
    uint64_t count;
    unsigned char lead = body[p];
    if (lead < 251)
        count = lead, p += 1;
    else if (lead == 252 && p + 3 <= len)
        count = le16(body + p + 1), p += 3;
    else if (lead == 253 && p + 4 <= len)
        count = le_n(body + p + 1, 3), p += 4;
    else if (lead == 254 && p + 9 <= len)
        count = le_n(body + p + 1, 8), p += 9;
    else
        return Py_None;
    if (count > ((uint64_t)1 << 40))
        return Py_None; /* bitmaps larger than any event: the reference refuses them */
    Py_ssize_t width = (Py_ssize_t)((count + 7) / 8), images = f->images[code];
    if (p + images * width > len)
        return Py_None;
    PyObject *values[] = {
        PyLong_FromLong(code),
        Py_NewRef(f->kind[code]),
        PyLong_FromLong(f->version[code]),
        PyLong_FromUnsignedLongLong(le_n(body, (int)id_len)),
        PyLong_FromLong((long)le16(body + id_len)),
        PyBytes_FromStringAndSize((const char *)body + extra_at, extra_len),
        PyLong_FromUnsignedLongLong(count),
        _PyLong_FromByteArray(body + p, (size_t)width, 1, 0),
        images == 2 ? _PyLong_FromByteArray(body + p + width, (size_t)width, 1, 0)
                    : Py_NewRef(Py_None),
        PyBytes_FromStringAndSize((const char *)body + p + images * width,
                                  len - p - images * width),
    };
    return make(f, f->rows_type, rows_fields, values, COUNT(rows_fields));
}

/* The payload of a transaction's XID, ANNOTATE_ROWS or MariaDB GTID (with no commit id and no
 * XA), as EventFramer._frame_control decodes them, or of a TABLE_MAP it decoded before (from
 * the table_maps it keeps); Py_None (borrowed) for another event. */
static PyObject *
control_payload(Framer *f, int code, const unsigned char *body, Py_ssize_t len)
{
    if (code == XID && len == 8 && f->xid_type != NULL) {
        PyObject *values[] = {PyLong_FromUnsignedLongLong(le_n(body, 8)), PyLong_FromLong(code)};
        return make(f, f->xid_type, xid_fields, values, COUNT(xid_fields));
    }
    if (code == ANNOTATE_ROWS && f->annotate_type != NULL) {
        PyObject *values[] = {
            PyBytes_FromStringAndSize((const char *)body, len), PyLong_FromLong(code),
        };
        return make(f, f->annotate_type, annotate_fields, values, COUNT(annotate_fields));
    }
    if (code == TABLE_MAP && f->table_maps != NULL) {
        PyObject *body_bytes = PyBytes_FromStringAndSize((const char *)body, len);
        if (body_bytes == NULL)
            return NULL;
        PyObject *known = PyDict_GetItemWithError(f->table_maps, body_bytes);
        Py_DECREF(body_bytes);
        return known != NULL ? Py_NewRef(known) : PyErr_Occurred() ? NULL : Py_None;
    }
    if (code != MARIADB_GTID || len != MARIA_GTID_BODY || f->gtid_type == NULL
        || (body[12] & f->gtid_more))
        return Py_None;
    Py_ssize_t extra = len - 13;
    while (extra > 0 && body[13 + extra - 1] == 0)
        extra--; /* the padding's zeros */
    PyObject *values[] = {
        PyLong_FromUnsignedLongLong(le_n(body, 8)),
        PyLong_FromUnsignedLong(le32(body + 8)),
        PyLong_FromLong(body[12]),
        Py_NewRef(Py_None),
        Py_NewRef(Py_None),
        PyBytes_FromStringAndSize((const char *)body + 13, extra),
        PyLong_FromLong(code),
    };
    return make(f, f->gtid_type, gtid_fields, values, COUNT(gtid_fields));
}

/* The size of the event at pos when its header, size and CRC32 are as they should be (code
 * set to its type), 0 when the reference step must read it, -1 on an error. */
static Py_ssize_t
checked_size(Framer *f, const Py_buffer *view, Py_ssize_t pos, int *code)
{
    const unsigned char *event = (const unsigned char *)view->buf + pos;
    Py_ssize_t remain = view->len - pos;
    if (pos < 0 || remain < HEADER_LEN || pos == f->first)
        return 0;
    Py_ssize_t size = (Py_ssize_t)le32(event + 9);
    *code = event[4];
    if (size < HEADER_LEN || size > (Py_ssize_t)MAX_EVENT_SIZE || size > remain
        || *code == FORMAT_DESCRIPTION || (f->trailer && size < HEADER_LEN + CHECKSUM_LEN))
        return 0;
    if (!f->trailer)
        return size;
    int matches = crc_matches(f, event, size);
    return matches < 0 ? -1 : matches ? size : 0;
}

/* The BinlogEvent of a checked event and its payload (stolen), or its EventHeader alone when
 * the payload is None. */
static PyObject *
framed_event(Framer *f, const unsigned char *event, Py_ssize_t pos, Py_ssize_t size,
             PyObject *payload)
{
    PyObject *fields[6] = {
        PyLong_FromUnsignedLong(le32(event)),      PyLong_FromLong(event[4]),
        PyLong_FromUnsignedLong(le32(event + 5)),  PyLong_FromSsize_t(size),
        PyLong_FromUnsignedLong(le32(event + 13)), PyLong_FromLong((long)le16(event + 17)),
    };
    PyObject *header = named_tuple(f->header_type, fields, 6);
    if (header == NULL || payload == Py_None) {
        if (payload != Py_None)
            Py_DECREF(payload);
        return header;
    }
    PyObject *items[4] = {
        PyLong_FromSsize_t(pos),
        header,
        payload,
        PyBytes_FromStringAndSize((const char *)event, size),
    };
    return named_tuple(f->event_type, items, 4);
}

/* frame(buf, pos): the BinlogEvent of a rows event or of a transaction's XID, ANNOTATE_ROWS or
 * GTID, the EventHeader of another event, or None. */
static PyObject *
framer_frame(Framer *f, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || f->kinds == NULL) {
        PyErr_SetString(PyExc_TypeError, "frame(buf, pos) of an initialised Framer");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); /* not a contiguous buffer: the reference step reads it */
        Py_RETURN_NONE;
    }
    int code = 0;
    Py_ssize_t size = checked_size(f, &view, pos, &code);
    PyObject *result = size < 0 ? NULL : size == 0 ? Py_NewRef(Py_None) : NULL;
    if (size > 0) {
        const unsigned char *event = (const unsigned char *)view.buf + pos;
        const unsigned char *body = event + HEADER_LEN;
        Py_ssize_t len = size - HEADER_LEN - f->trailer;
        PyObject *payload = f->id_len[code] ? rows_payload(f, code, body, len)
                                            : control_payload(f, code, body, len);
        result = payload == NULL ? NULL : framed_event(f, event, pos, size, payload);
    }
    PyBuffer_Release(&view);
    return result;
}

/* A named tuple type the items can be stored in directly: a tuple subclass of no more size. */
static int
is_plain_tuple_type(PyObject *type)
{
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type))
        return 0;
    PyTypeObject *t = (PyTypeObject *)type;
    return t->tp_basicsize == PyTuple_Type.tp_basicsize
           && t->tp_itemsize == PyTuple_Type.tp_itemsize && t->tp_dictoffset == 0;
}

/* One rows type of the rows_types dict: code -> (kind, version, id_len). */
static int
add_rows_type(Framer *f, PyObject *code, PyObject *layout)
{
    long c = PyLong_AsLong(code);
    const char *what = "rows_types maps a type code to (kind, version 1 or 2, id_len 4 or 6)";
    if (c == -1 && PyErr_Occurred())
        return -1;
    if (c <= 0 || c > 255 || c == FORMAT_DESCRIPTION || !PyTuple_Check(layout)
        || PyTuple_GET_SIZE(layout) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(layout, 0))) {
        PyErr_SetString(PyExc_ValueError, what);
        return -1;
    }
    long version = PyLong_AsLong(PyTuple_GET_ITEM(layout, 1));
    long id_len = PyLong_AsLong(PyTuple_GET_ITEM(layout, 2));
    if (PyErr_Occurred())
        return -1;
    if ((version != 1 && version != 2) || (id_len != 4 && id_len != 6)) {
        PyErr_SetString(PyExc_ValueError, what);
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(layout, 0);
    int update = PyUnicode_CompareWithASCIIString(kind, "update") == 0;
    if (PyList_Append(f->kinds, kind) < 0)
        return -1;
    f->id_len[c] = (unsigned char)id_len, f->version[c] = (unsigned char)version;
    f->images[c] = update ? 2 : 1, f->kind[c] = kind;
    return 0;
}

static int
framer_init(Framer *f, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {
        "crc32", "header_type", "event_type", "rows_type", "trailer", "first", "rows_types",
        "xid_type", "annotate_type", "gtid_type", "gtid_more", "table_maps", NULL,
    };
    PyObject *crc32, *header_type, *event_type, *rows_type, *rows_types;
    PyObject *xid_type = NULL, *annotate_type = NULL, *gtid_type = NULL, *table_maps = NULL;
    Py_ssize_t trailer, first;
    long gtid_more = 0xFF;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOnnO!|O!O!O!lO!", keywords, &crc32,
                                     &header_type, &event_type, &rows_type, &trailer, &first,
                                     &PyDict_Type, &rows_types, &PyType_Type, &xid_type,
                                     &PyType_Type, &annotate_type, &PyType_Type, &gtid_type,
                                     &gtid_more, &PyDict_Type, &table_maps))
        return -1;
    if (f->kinds != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Framer is made once");
        return -1;
    }
    if (!PyCallable_Check(crc32) || !is_plain_tuple_type(header_type)
        || !is_plain_tuple_type(event_type) || !PyType_Check(rows_type)
        || (trailer != 0 && trailer != CHECKSUM_LEN)) {
        PyErr_SetString(PyExc_TypeError, "Framer(crc32 callable, two named tuple types, the "
                                         "rows event type, trailer 0 or 4, ...)");
        return -1;
    }
    f->crc32 = Py_NewRef(crc32);
    f->header_type = (PyTypeObject *)Py_NewRef(header_type);
    f->event_type = (PyTypeObject *)Py_NewRef(event_type);
    f->rows_type = (PyTypeObject *)Py_NewRef(rows_type);
    f->xid_type = (PyTypeObject *)Py_XNewRef(xid_type);
    f->annotate_type = (PyTypeObject *)Py_XNewRef(annotate_type);
    f->gtid_type = (PyTypeObject *)Py_XNewRef(gtid_type);
    f->gtid_more = gtid_more;
    f->table_maps = Py_XNewRef(table_maps);
    f->trailer = trailer, f->first = first;
    f->empty = PyTuple_New(0);
    f->kinds = PyList_New(0);
    if (f->empty == NULL || f->kinds == NULL)
        return -1;
    for (int i = 0; i < FIELDS; i++) {
        f->names[i] = PyUnicode_InternFromString(field_names[i]);
        if (f->names[i] == NULL)
            return -1;
    }
    PyObject *code, *layout;
    Py_ssize_t at = 0;
    while (PyDict_Next(rows_types, &at, &code, &layout)) {
        if (add_rows_type(f, code, layout) < 0)
            return -1;
    }
    return 0;
}

static int
framer_traverse(Framer *f, visitproc visit, void *arg)
{
    Py_VISIT(f->crc32);
    Py_VISIT(f->header_type);
    Py_VISIT(f->event_type);
    Py_VISIT(f->rows_type);
    Py_VISIT(f->xid_type);
    Py_VISIT(f->annotate_type);
    Py_VISIT(f->gtid_type);
    Py_VISIT(f->table_maps);
    Py_VISIT(f->kinds);
    return 0;
}

static int
framer_clear(Framer *f)
{
    Py_CLEAR(f->crc32);
    Py_CLEAR(f->header_type);
    Py_CLEAR(f->event_type);
    Py_CLEAR(f->rows_type);
    Py_CLEAR(f->kinds);
    Py_CLEAR(f->empty);
    Py_CLEAR(f->xid_type);
    Py_CLEAR(f->annotate_type);
    Py_CLEAR(f->gtid_type);
    Py_CLEAR(f->table_maps);
    for (int i = 0; i < FIELDS; i++)
        Py_CLEAR(f->names[i]);
    memset(f->id_len, 0, sizeof f->id_len);
    return 0;
}

static void
framer_dealloc(Framer *f)
{
    PyObject_GC_UnTrack(f);
    framer_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyMethodDef framer_methods[] = {
    {"frame", (PyCFunction)(void (*)(void))framer_frame, METH_FASTCALL,
     "frame(buf, pos): the BinlogEvent of a rows event at pos, the EventHeader of another "
     "event (CRC32 checked), or None where the reference step must read it."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FramerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "binlake.binlog._frame.Framer",
    .tp_basicsize = sizeof(Framer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Events framed in C for one format context (binlake.binlog.stream).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)framer_init,
    .tp_traverse = (traverseproc)framer_traverse,
    .tp_clear = (inquiry)framer_clear,
    .tp_dealloc = (destructor)framer_dealloc,
    .tp_methods = framer_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "binlake.binlog._frame",
    "Events of a binlog in memory framed in C (binlake.binlog.stream).", -1,
};

/* The module, with its one type (PyModule_AddType readies it). */
PyMODINIT_FUNC
PyInit__frame(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddType(m, &FramerType) < 0)
        Py_CLEAR(m);
    return m;
}
