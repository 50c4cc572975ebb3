/* Row images decoded in C (issue #37): the native twin of rowcodec's generated decoders.
 *
 * A RowsDecoder is built once per layout from "plans" that binlake.binlog.rowplan makes out of
 * the same ColumnSpecs the generated Python decoders are made from: one (op, index, a, b, obj)
 * tuple per column present in the image. Calling it as decoder(buf, end, out) decodes every row
 * image of one rows event and appends each (before, after) pair to the list out, exactly as the
 * generated decode_all does, and returns the position after the last image.
 *
 * Every read is checked against the buffer: a value that would run past it raises ValueError,
 * one of rowcodec.DECODE_FAILURES, and rows.py then walks the image with the checked Python
 * decoders for the precise typed error. Types without a native op (old temporal formats, JSON,
 * GEOMETRY, hinted MariaDB types) call the Python per-value decoder the plan holds; odd values
 * of the native ones (zero dates, bad timestamps) call the same Python helpers as the snippets.
 */
#include "_rowimage_values.h"

/* ---- the plan ------------------------------------------------------------------------------ */

static void
image_clear(Image *image)
{
    for (Py_ssize_t i = 0; i < image->count; i++) {
        Py_CLEAR(image->columns[i].obj);
        Py_CLEAR(image->columns[i].obj2);
    }
    PyMem_Free(image->columns);
    image->columns = NULL;
    image->count = 0;
}

/* Whether an op's sizes are ones its reads are written for (the buffer checks rely on them). */
static int
sizes_fit(const Column *c)
{
    long long a = c->a;
    switch (c->op) {
    case OP_INT: return a == 1 || a == 2 || a == 3 || a == 4 || a == 8;
    case OP_FLOAT: return a == 4 || a == 8;
    case OP_BYTES: return a >= 1 && a <= 4 && c->b >= 0;
    case OP_TEXT: return a >= 1 && a <= 4 && c->b >= TEXT_CODEC && c->b <= TEXT_CHARMAP;
    case OP_DECIMAL: return a >= 0 && c->b >= 1 && c->b <= MAX_DECIMAL_BYTES;
    case OP_BIT: return a >= 0 && a <= 64;
    case OP_ENUM: return a == 1 || a == 2;
    case OP_SET: return a >= 1 && a <= 8;
    case OP_DATETIME2: case OP_TIMESTAMP2: case OP_TIME2: return a >= 0 && a <= 6;
    default: return 1;
    }
}

static int
decimal_groups_from(Column *c)
{
    PyObject *groups = PySequence_Fast(c->obj2, "DECIMAL groups are a sequence");
    if (groups == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(groups);
    long total = 0;
    int ok = n <= MAX_GROUPS;
    for (Py_ssize_t g = 0; ok && g < n; g++) {
        int nbytes, digits, is_int;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(groups, g), "iip", &nbytes, &digits,
                              &is_int)
             && nbytes >= 1 && nbytes <= 4 && digits >= 1 && digits <= 9;
        if (ok) {
            c->group_bytes[g] = (unsigned char)nbytes;
            c->group_digits[g] = (unsigned char)digits;
            total += nbytes;
        }
    }
    Py_DECREF(groups);
    c->groups = (int)n;
    if (!ok || total != c->b || total > MAX_DECIMAL_BYTES) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a DECIMAL plan's groups do not add up");
        return -1;
    }
    return 0;
}

static int
column_from(Column *c, PyObject *item, Py_ssize_t column_count)
{
    PyObject *obj;
    int op;
    if (!PyArg_ParseTuple(item, "inLLO", &op, &c->index, &c->a, &c->b, &obj))
        return -1;
    c->op = op;
    if (op < 0 || op >= OP_COUNT || c->index < 0 || c->index >= column_count) {
        PyErr_SetString(PyExc_ValueError, "a row plan names an unknown op or column");
        return -1;
    }
    if (!sizes_fit(c)) {
        PyErr_Format(PyExc_ValueError, "a row plan's op %d has sizes %lld, %lld", op, c->a, c->b);
        return -1;
    }
    if ((op == OP_DECIMAL || op == OP_TIMESTAMP2)) {
        if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
            PyErr_SetString(PyExc_TypeError, "a row plan's pair is not a 2-tuple");
            return -1;
        }
        c->obj = Py_NewRef(PyTuple_GET_ITEM(obj, 0));
        c->obj2 = Py_NewRef(PyTuple_GET_ITEM(obj, 1));
        return op == OP_DECIMAL ? decimal_groups_from(c) : 0;
    }
    c->obj = Py_NewRef(obj);
    if (op == OP_TEXT && c->b != TEXT_CHARMAP) {
        c->codec = PyUnicode_AsUTF8(obj);
        if (c->codec == NULL)
            return -1;
    }
    if ((op == OP_ENUM || op == OP_SET) && !PyTuple_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "ENUM/SET labels are not a tuple");
        return -1;
    }
    if (op == OP_SET && PyTuple_GET_SIZE(obj) > 64) {
        PyErr_SetString(PyExc_ValueError, "a SET has at most 64 labels");
        return -1;
    }
    return 0;
}

static int
image_from(Image *image, PyObject *plan, Py_ssize_t column_count)
{
    PyObject *seq = PySequence_Fast(plan, "a row plan is a sequence of column tuples");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    image->columns = PyMem_Calloc(n ? n : 1, sizeof(Column));
    if (image->columns == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    image->count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (column_from(&image->columns[i], PySequence_Fast_GET_ITEM(seq, i), column_count) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* ---- images and events ------------------------------------------------------------------ */

static PyObject *
image_at(const RowsDecoder *self, const Image *image, const Buffer *buf, Py_ssize_t *p)
{
    Py_ssize_t null_bytes = (image->count + 7) / 8;
    if (buf->size - *p < null_bytes)
        return overrun();
    const unsigned char *nulls = buf->data + *p;
    *p += null_bytes;
    PyObject *row = PyTuple_New(self->column_count);
    if (row == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->column_count; i++)
        PyTuple_SET_ITEM(row, i, Py_NewRef(self->absent));
    for (Py_ssize_t bit = 0; bit < image->count; bit++) {
        const Column *c = &image->columns[bit];
        PyObject *value;
        if (nulls[bit >> 3] >> (bit & 7) & 1)
            value = Py_NewRef(Py_None);
        else if ((value = value_at(c, buf, p)) == NULL) {
            Py_DECREF(row);
            return NULL;
        }
        Py_SETREF(PyTuple_GET_ITEM(row, c->index), value);
    }
    return row;
}

/* The tuple (a, b), both references stolen (a format string parsed per row cost 4% of it). */
static PyObject *
pair(PyObject *a, PyObject *b)
{
    PyObject *t = PyTuple_New(2);
    if (t == NULL) {
        Py_DECREF(a);
        Py_DECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    return t;
}

static PyObject *
change_at(const RowsDecoder *self, const Buffer *buf, Py_ssize_t *p)
{
    PyObject *first = image_at(self, &self->before, buf, p);
    if (first == NULL)
        return NULL;
    if (self->kind == 2) {
        PyObject *second = image_at(self, &self->after, buf, p);
        if (second == NULL) {
            Py_DECREF(first);
            return NULL;
        }
        return pair(first, second);
    }
    return self->kind == 0 ? pair(Py_NewRef(Py_None), first) : pair(first, Py_NewRef(Py_None));
}

static PyObject *
decoder_call(RowsDecoder *self, PyObject *args, PyObject *kwargs)
{
    PyObject *object, *out;
    Py_ssize_t end;
    static char *names[] = {"buf", "end", "out", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnO!", names, &object, &end, &PyList_Type,
                                     &out))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(object, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Buffer buf = {object, view.buf, view.len};
    Py_ssize_t p = 0;
    PyObject *result = NULL;
    if (self->before.count == 0 && end > 0)
        overrun();
    else {
        while (p < end) {
            PyObject *change = change_at(self, &buf, &p);
            if (change == NULL || PyList_Append(out, change) < 0) {
                Py_XDECREF(change);
                goto done;
            }
            Py_DECREF(change);
        }
        result = PyLong_FromSsize_t(p);
    }
done:
    PyBuffer_Release(&view);
    return result;
}

static int
decoder_init(RowsDecoder *self, PyObject *args, PyObject *kwargs)
{
    PyObject *before, *after, *absent;
    const char *kind;
    Py_ssize_t column_count;
    static char *names[] = {"before", "after", "kind", "column_count", "absent", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOsnO", names, &before, &after, &kind,
                                     &column_count, &absent))
        return -1;
    if (self->absent != NULL) {  /* a decoder in use by another thread must not change */
        PyErr_SetString(PyExc_TypeError, "a RowsDecoder is initialised once");
        return -1;
    }
    self->kind = strcmp(kind, "write") == 0 ? 0 : strcmp(kind, "delete") == 0 ? 1 : 2;
    if (self->kind == 2 && strcmp(kind, "update") != 0) {
        PyErr_Format(PyExc_ValueError, "unknown rows event kind %s", kind);
        return -1;
    }
    if (column_count < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative column count");
        return -1;
    }
    self->column_count = column_count;
    self->absent = Py_NewRef(absent);
    if (image_from(&self->before, before, column_count) < 0)
        return -1;
    return self->kind == 2 ? image_from(&self->after, after, column_count) : 0;
}

static void
decoder_dealloc(RowsDecoder *self)
{
    image_clear(&self->before);
    image_clear(&self->after);
    Py_CLEAR(self->absent);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject RowsDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "binlake.binlog._rowimage.RowsDecoder",
    .tp_doc = "RowsDecoder(before, after, kind, column_count, absent): (buf, end, out) -> end",
    .tp_basicsize = sizeof(RowsDecoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)decoder_init,
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_call = (ternaryfunc)decoder_call,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "binlake.binlog._rowimage",
    .m_doc = "Row images decoded in C from plans (binlake.binlog.rowplan).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__rowimage(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL || PyType_Ready(&RowsDecoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "RowsDecoder", (PyObject *)&RowsDecoderType) < 0
        || PyModule_AddIntConstant(m, "OP_COUNT", OP_COUNT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
