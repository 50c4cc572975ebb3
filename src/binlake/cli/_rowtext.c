/* A row's JSON text in C (issue #37): the native twin of render.RowFormat.python_text.
 *
 * row_text(row, firsts, others, absent, fallback) returns exactly the str RowFormat.python_text
 * returns for the tuple row: the values that are not `absent`, each after its key piece (firsts[i]
 * opens the object, others[i] follows another value), as json.dumps(..., ensure_ascii=False)
 * writes them. The common types are written here: int, None, str (json's escaping: '"', '\\' and
 * the control characters, as \n, \u001f...; everything else as is), float (repr; NaN and the
 * infinities quoted), Decimal (str, quoted), bytes (base64, quoted), date, naive and UTC datetime
 * (ISO-8601, quoted; a datetime of another zone's text is its isoformat()). Any other value, bool and int
 * subclasses among them, is fallback(value): render.value_text, the Python path.
 *
 * The text is built in two passes: the first finds each piece's length and widest character
 * (formatting numbers and dates into a scratch arena), the second writes them into one str of
 * exactly that width, so the result is the canonical str Python would build.
 * tests/property/test_dump_render_properties.py holds it to the Python path for every type.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <math.h>
#include <string.h>

enum { P_TEXT, P_ESCAPE, P_ASCII, P_BASE64 };

/* One piece of a row's text: a key, or a value. */
typedef struct {
    int kind;          /* P_TEXT: obj, a str; P_ESCAPE: obj, a str to escape; P_ASCII: ascii;
                          P_BASE64: obj, bytes */
    int quoted;        /* written between double quotes */
    int owned;         /* obj is a new reference */
    PyObject *obj;
    const char *ascii; /* P_ASCII: len characters in the arena, or a literal */
    Py_ssize_t len;    /* the characters written, quotes excluded */
} Piece;

/* The widest text a value formats into the arena: a long long (20), a UTC datetime (32). */
#define SLOT 32
#define STACK_COLUMNS 32

static PyObject *DecimalType;

static const char HEX[] = "0123456789abcdef";
static const char BASE64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The characters json adds escaping c: 1 for a two-character escape, 5 for \u00XX. */
static inline Py_ssize_t
escape_extra(Py_UCS4 c)
{
    if (c >= 0x20)
        return c == '"' || c == '\\';
    return (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') ? 1 : 5;
}

/* escape_extra of each one-byte character: the scan of most strings, without branches. */
static unsigned char EXTRA_OF_BYTE[256];

static Py_ssize_t
escaped_extra(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), extra = 0;
    const void *data = PyUnicode_DATA(s);
    switch (PyUnicode_KIND(s)) {
    case PyUnicode_1BYTE_KIND:
        for (Py_ssize_t i = 0; i < n; i++)
            extra += EXTRA_OF_BYTE[((const Py_UCS1 *)data)[i]];
        break;
    case PyUnicode_2BYTE_KIND:
        for (Py_ssize_t i = 0; i < n; i++)
            extra += escape_extra(((const Py_UCS2 *)data)[i]);
        break;
    default:
        for (Py_ssize_t i = 0; i < n; i++)
            extra += escape_extra(((const Py_UCS4 *)data)[i]);
    }
    return extra;
}

/* ---- the first pass: a value's piece ------------------------------------------------------ */

static void
text_piece(Piece *p, PyObject *text, int quoted, int owned)
{
    p->kind = P_TEXT;
    p->quoted = quoted;
    p->owned = owned;
    p->obj = text;
    p->len = PyUnicode_GET_LENGTH(text);
}

static void
ascii_piece(Piece *p, const char *ascii, Py_ssize_t len, int quoted)
{
    p->kind = P_ASCII;
    p->quoted = quoted;
    p->ascii = ascii;
    p->len = len;
}

/* A str, quoted and escaped as json's encode_basestring (ensure_ascii=False) does. */
static void
str_piece(Piece *p, PyObject *value)
{
    Py_ssize_t extra = escaped_extra(value);
    text_piece(p, value, 1, 0);
    if (extra) {
        p->kind = P_ESCAPE;
        p->len += extra;
    }
}

/* The piece of a value whose text is a new str (repr, str, isoformat, the fallback). */
static int
new_text_piece(Piece *p, PyObject *text, int quoted)
{
    if (text == NULL)
        return -1;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "a value's text is %.100s, not str", Py_TYPE(text)->tp_name);
        Py_DECREF(text);
        return -1;
    }
    text_piece(p, text, quoted, 1);
    return 0;
}

/* n's decimal digits, right-aligned in the `width` characters ending at end (zero-padded). */
static char *
put_digits(char *end, unsigned long long n, int width)
{
    do {
        *--end = (char)('0' + n % 10);
        n /= 10;
        width--;
    } while (n || width > 0);
    return end;
}

static int
int_piece(Piece *p, PyObject *value, char *slot)
{
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        return new_text_piece(p, PyObject_Str(value), 0);
    unsigned long long magnitude = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    char *end = slot + SLOT, *start = put_digits(end, magnitude, 1);
    if (n < 0)
        *--start = '-';
    ascii_piece(p, start, end - start, 0);
    return 0;
}

static int
float_piece(Piece *p, PyObject *value)
{
    return new_text_piece(p, PyObject_Repr(value), !isfinite(PyFloat_AS_DOUBLE(value)));
}

/* YYYY-MM-DD at slot (years below 1000 zero-padded, as isoformat() writes them). */
static void
put_date(char *slot, PyObject *value)
{
    put_digits(slot + 4, (unsigned)PyDateTime_GET_YEAR(value), 4);
    slot[4] = '-';
    put_digits(slot + 7, (unsigned)PyDateTime_GET_MONTH(value), 2);
    slot[7] = '-';
    put_digits(slot + 10, (unsigned)PyDateTime_GET_DAY(value), 2);
}

static void
date_piece(Piece *p, PyObject *value, char *slot)
{
    put_date(slot, value);
    ascii_piece(p, slot, 10, 1);
}

/* A datetime as isoformat() writes it: in C when naive or in UTC (the decoder's TIMESTAMPs),
 * by isoformat() in any other zone. */
static int
datetime_piece(Piece *p, PyObject *value, char *slot)
{
    PyObject *zone = PyDateTime_DATE_GET_TZINFO(value);
    if (zone != Py_None && zone != PyDateTime_TimeZone_UTC)
        return new_text_piece(p, PyObject_CallMethod(value, "isoformat", NULL), 1);
    put_date(slot, value);
    slot[10] = 'T';
    put_digits(slot + 13, (unsigned)PyDateTime_DATE_GET_HOUR(value), 2);
    slot[13] = ':';
    put_digits(slot + 16, (unsigned)PyDateTime_DATE_GET_MINUTE(value), 2);
    slot[16] = ':';
    put_digits(slot + 19, (unsigned)PyDateTime_DATE_GET_SECOND(value), 2);
    unsigned micros = (unsigned)PyDateTime_DATE_GET_MICROSECOND(value);
    if (micros) {
        slot[19] = '.';
        put_digits(slot + 26, micros, 6);
    }
    Py_ssize_t len = micros ? 26 : 19;
    if (zone != Py_None) {
        memcpy(slot + len, "+00:00", 6);
        len += 6;
    }
    ascii_piece(p, slot, len, 1);
    return 0;
}

static int
value_piece(Piece *p, PyObject *value, char *slot, PyObject *fallback)
{
    PyTypeObject *type = Py_TYPE(value);
    p->owned = 0;
    if (type == &PyLong_Type)
        return int_piece(p, value, slot);
    if (value == Py_None) {
        ascii_piece(p, "null", 4, 0);
        return 0;
    }
    if (type == &PyUnicode_Type) {
        str_piece(p, value);
        return 0;
    }
    if (type == &PyFloat_Type)
        return float_piece(p, value);
    if ((PyObject *)type == DecimalType)
        return new_text_piece(p, PyObject_Str(value), 1);
    if (type == &PyBytes_Type) {
        p->kind = P_BASE64;
        p->quoted = 1;
        p->obj = value;
        p->len = (PyBytes_GET_SIZE(value) + 2) / 3 * 4;
        return 0;
    }
    if (type == PyDateTimeAPI->DateTimeType)
        return datetime_piece(p, value, slot);
    if (type == PyDateTimeAPI->DateType) {
        date_piece(p, value, slot);
        return 0;
    }
    return new_text_piece(p, PyObject_CallOneArg(fallback, value), 0);
}

/* ---- the second pass: the pieces written into one str ------------------------------------- */

static Py_ssize_t
write_escaped(int kind, void *out, Py_ssize_t pos, PyObject *s)
{
    int in_kind = PyUnicode_KIND(s);
    const void *in = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(in_kind, in, i);
        if (escape_extra(c) == 0) {
            PyUnicode_WRITE(kind, out, pos++, c);
            continue;
        }
        PyUnicode_WRITE(kind, out, pos++, '\\');
        switch (c) {
        case '"': case '\\': break;
        case '\b': c = 'b'; break;
        case '\f': c = 'f'; break;
        case '\n': c = 'n'; break;
        case '\r': c = 'r'; break;
        case '\t': c = 't'; break;
        default:
            PyUnicode_WRITE(kind, out, pos++, 'u');
            PyUnicode_WRITE(kind, out, pos++, '0');
            PyUnicode_WRITE(kind, out, pos++, '0');
            PyUnicode_WRITE(kind, out, pos++, HEX[c >> 4]);
            c = HEX[c & 0xf];
        }
        PyUnicode_WRITE(kind, out, pos++, c);
    }
    return pos;
}

static Py_ssize_t
write_base64(int kind, void *out, Py_ssize_t pos, PyObject *bytes)
{
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bytes);
    Py_ssize_t n = PyBytes_GET_SIZE(bytes), i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned long v = (unsigned long)b[i] << 16 | (unsigned long)b[i + 1] << 8 | b[i + 2];
        PyUnicode_WRITE(kind, out, pos++, BASE64[v >> 18]);
        PyUnicode_WRITE(kind, out, pos++, BASE64[(v >> 12) & 63]);
        PyUnicode_WRITE(kind, out, pos++, BASE64[(v >> 6) & 63]);
        PyUnicode_WRITE(kind, out, pos++, BASE64[v & 63]);
    }
    if (i < n) {
        unsigned long v = (unsigned long)b[i] << 16 | (i + 1 < n ? (unsigned long)b[i + 1] << 8 : 0);
        PyUnicode_WRITE(kind, out, pos++, BASE64[v >> 18]);
        PyUnicode_WRITE(kind, out, pos++, BASE64[(v >> 12) & 63]);
        PyUnicode_WRITE(kind, out, pos++, i + 1 < n ? BASE64[(v >> 6) & 63] : '=');
        PyUnicode_WRITE(kind, out, pos++, '=');
    }
    return pos;
}

static Py_ssize_t
write_piece(PyObject *out, Py_ssize_t pos, const Piece *p)
{
    int kind = PyUnicode_KIND(out);
    void *data = PyUnicode_DATA(out);
    if (p->quoted)
        PyUnicode_WRITE(kind, data, pos++, '"');
    switch (p->kind) {
    case P_TEXT:
        if (PyUnicode_KIND(p->obj) == kind)
            memcpy((char *)data + pos * kind, PyUnicode_DATA(p->obj), (size_t)(p->len * kind));
        else
            PyUnicode_CopyCharacters(out, pos, p->obj, 0, p->len);  /* widens: cannot fail */
        pos += p->len;
        break;
    case P_ESCAPE:
        pos = write_escaped(kind, data, pos, p->obj);
        break;
    case P_BASE64:
        pos = write_base64(kind, data, pos, p->obj);
        break;
    default:
        if (kind == PyUnicode_1BYTE_KIND) {
            memcpy((char *)data + pos, p->ascii, (size_t)p->len);
            pos += p->len;
            break;
        }
        for (Py_ssize_t i = 0; i < p->len; i++)
            PyUnicode_WRITE(kind, data, pos++, (Py_UCS1)p->ascii[i]);
    }
    if (p->quoted)
        PyUnicode_WRITE(kind, data, pos++, '"');
    return pos;
}

static Py_UCS4
piece_maxchar(const Piece *p)
{
    return (p->kind == P_TEXT || p->kind == P_ESCAPE) ? PyUnicode_MAX_CHAR_VALUE(p->obj) : 127;
}

static PyObject *
join_pieces(const Piece *pieces, Py_ssize_t count)
{
    if (count == 0)
        return PyUnicode_FromString("{}");
    Py_ssize_t total = 1;  /* the closing brace */
    Py_UCS4 maxchar = 127;
    for (Py_ssize_t i = 0; i < count; i++) {
        total += pieces[i].len + 2 * pieces[i].quoted;
        Py_UCS4 widest = piece_maxchar(&pieces[i]);
        maxchar = widest > maxchar ? widest : maxchar;
    }
    PyObject *out = PyUnicode_New(total, maxchar);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        pos = write_piece(out, pos, &pieces[i]);
    PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), pos, '}');
    return out;
}

/* ---- row_text ----------------------------------------------------------------------------- */

static int
key_piece(Piece *p, PyObject *keys, Py_ssize_t column)
{
    PyObject *key = PyTuple_GET_ITEM(keys, column);
    if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "a key piece is not a str");
        return -1;
    }
    text_piece(p, key, 0, 0);
    return 0;
}

/* The pieces of row (count set to how many), or -1 with an exception set. */
static int
row_pieces(PyObject *const *args, Piece *pieces, char *arena, Py_ssize_t *count)
{
    PyObject *row = args[0], *firsts = args[1], *others = args[2], *absent = args[3];
    Py_ssize_t n = PyTuple_GET_SIZE(row), k = 0;
    for (Py_ssize_t column = 0; column < n; column++) {
        PyObject *value = PyTuple_GET_ITEM(row, column);
        if (value == absent)
            continue;
        *count = k;
        if (key_piece(&pieces[k], k ? others : firsts, column) < 0
            || value_piece(&pieces[k + 1], value, arena + column * SLOT, args[4]) < 0)
            return -1;
        k += 2;
    }
    *count = k;
    return 0;
}

static void
release(Piece *pieces, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (pieces[i].owned)
            Py_DECREF(pieces[i].obj);
}

static int
check_arguments(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "row_text(row, firsts, others, absent, fallback)");
        return -1;
    }
    if (!PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "row, firsts and others must be tuples");
        return -1;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(args[0]), columns = PyTuple_GET_SIZE(args[1]);
    if (PyTuple_GET_SIZE(args[2]) != columns) {
        PyErr_SetString(PyExc_ValueError, "firsts and others differ in length");
        return -1;
    }
    if (width != columns) {
        PyErr_Format(PyExc_ValueError, "a row of %zd values for %zd columns", width, columns);
        return -1;
    }
    return 0;
}

static PyObject *
row_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_arguments(args, nargs) < 0)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args[0]), count = 0;
    Piece stack_pieces[2 * STACK_COLUMNS];
    char stack_arena[SLOT * STACK_COLUMNS];
    Piece *pieces = stack_pieces;
    char *arena = stack_arena;
    if (n > STACK_COLUMNS) {
        pieces = PyMem_New(Piece, 2 * (size_t)n);
        arena = PyMem_Malloc((size_t)n * SLOT);
        if (pieces == NULL || arena == NULL) {
            PyMem_Free(pieces);
            PyMem_Free(arena);
            return PyErr_NoMemory();
        }
    }
    PyObject *out = NULL;
    if (row_pieces(args, pieces, arena, &count) == 0)
        out = join_pieces(pieces, count);
    release(pieces, count);
    if (pieces != stack_pieces) {
        PyMem_Free(pieces);
        PyMem_Free(arena);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"row_text", (PyCFunction)(void (*)(void))row_text, METH_FASTCALL,
     "row_text(row, firsts, others, absent, fallback) -> str: RowFormat.python_text(row)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "binlake.cli._rowtext",
    .m_doc = "A row's JSON text in C (binlake.cli.render.RowFormat).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__rowtext(void)
{
    for (int c = 0; c < 256; c++)
        EXTRA_OF_BYTE[c] = (unsigned char)escape_extra((Py_UCS4)c);
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    PyObject *decimal = PyImport_ImportModule("decimal");
    if (decimal == NULL)
        return NULL;
    DecimalType = PyObject_GetAttrString(decimal, "Decimal");
    Py_DECREF(decimal);
    if (DecimalType == NULL)
        return NULL;
    return PyModule_Create(&module);
}
