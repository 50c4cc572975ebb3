/* Row values decoded in C: the value half of _rowimage.c (included by it alone, one
 * translation unit), with the ops, plans' column records and byte readers both halves use.
 * Its SHA-256 is in the build record beside _rowimage.c's (binlake.compiled.source_paths). */
#ifndef BINLAKE_ROWIMAGE_VALUES_H
#define BINLAKE_ROWIMAGE_VALUES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

enum {
    OP_PYTHON = 0,     /* obj: value_decoder(spec), (buf, pos) -> (value, end) */
    OP_INT = 1,        /* a: width 1, 2, 3, 4 or 8; b: unsigned */
    OP_FLOAT = 2,      /* a: width 4 or 8 */
    OP_BYTES = 3,      /* a: length prefix bytes; b: pad to b bytes with NUL (BINARY), 0: none */
    OP_TEXT = 4,       /* a: length prefix bytes; b: TEXT_*; obj: the codec's name or table */
    OP_DECIMAL = 5,    /* a: scale; b: bytes; obj: (Decimal, ((bytes, digits), ...)) */
    OP_YEAR = 6,
    OP_BIT = 7,        /* a: bits */
    OP_ENUM = 8,       /* a: bytes; obj: ("", label1, ...) */
    OP_SET = 9,        /* a: bytes; obj: (label1, ...) */
    OP_DATE = 10,      /* obj: temporal._date_bad */
    OP_DATETIME2 = 11, /* a: fsp; obj: temporal._datetime_bad */
    OP_TIMESTAMP2 = 12, /* a: fsp; obj: (temporal._timestamp_bad, UTC) */
    OP_TIME2 = 13,     /* a: fsp */
    OP_COUNT = 14
};

enum { TEXT_CODEC = 0, TEXT_UTF8 = 1, TEXT_CHARMAP = 2 };

#define MAX_GROUPS 16
#define MAX_DECIMAL_BYTES 40

typedef struct {
    int op;
    Py_ssize_t index;
    long long a, b;
    PyObject *obj;   /* owned, may be NULL */
    PyObject *obj2;  /* owned, may be NULL (second item of a pair) */
    const char *codec; /* borrowed from obj (OP_TEXT) */
    int groups;      /* OP_DECIMAL: its digit groups, most significant first */
    unsigned char group_bytes[MAX_GROUPS], group_digits[MAX_GROUPS];
} Column;

typedef struct {
    Py_ssize_t count;
    Column *columns;
} Image;

typedef struct {
    PyObject_HEAD
    Image before, after;   /* after.count == 0 unless the kind is update */
    int kind;              /* 0 write, 1 delete, 2 update */
    Py_ssize_t column_count;
    PyObject *absent;
} RowsDecoder;

static const int FRAC_BYTES[7] = {0, 1, 1, 2, 2, 3, 3};
static const long long FRAC_SCALE[7] = {1, 10000, 10000, 100, 100, 1, 1};

static PyObject *
overrun(void)
{
    PyErr_SetString(PyExc_ValueError, "a row image runs past the rows data");
    return NULL;
}

static unsigned long long
read_le(const unsigned char *s, int n)
{
    unsigned long long v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | s[i];
    return v;
}

static unsigned long long
read_be(const unsigned char *s, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | s[i];
    return v;
}


/* ---- values ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject *object;          /* the buffer as passed, for the Python decoders */
    const unsigned char *data;
    Py_ssize_t size;
} Buffer;

static PyObject *
call_python(const Column *c, const Buffer *buf, Py_ssize_t *p)
{
    PyObject *result = PyObject_CallFunction(c->obj, "On", buf->object, *p);
    if (result == NULL)
        return NULL;
    PyObject *value = NULL;
    Py_ssize_t end;
    if (PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 2) {
        end = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
        if (!(end == -1 && PyErr_Occurred())) {
            if (end < *p || end > buf->size)
                overrun();
            else {
                value = Py_NewRef(PyTuple_GET_ITEM(result, 0));
                *p = end;
            }
        }
    }
    else
        PyErr_SetString(PyExc_TypeError, "a value decoder returned no (value, end) pair");
    Py_DECREF(result);
    return value;
}

static PyObject *
int_value(const Column *c, const unsigned char *s)
{
    int width = (int)c->a;
    unsigned long long raw = read_le(s, width);
    if (c->b)
        return PyLong_FromUnsignedLongLong(raw);
    if (width < 8 && raw >> (8 * width - 1))
        raw |= ~0ULL << (8 * width);
    return PyLong_FromLongLong((long long)raw);
}

static PyObject *
text_value(const Column *c, const unsigned char *s, Py_ssize_t n)
{
    if (c->b == TEXT_UTF8)
        return PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (c->b == TEXT_CHARMAP)  /* what the codec's decode, codecs.charmap_decode, runs */
        return PyUnicode_DecodeCharmap((const char *)s, n, c->obj, "strict");
    return PyUnicode_Decode((const char *)s, n, c->codec, "strict");
}

static PyObject *
bytes_value(const Column *c, const unsigned char *s, Py_ssize_t n)
{
    if (c->b <= n)
        return PyBytes_FromStringAndSize((const char *)s, n);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)c->b);
    if (out == NULL)
        return NULL;
    memcpy(PyBytes_AS_STRING(out), s, n);
    memset(PyBytes_AS_STRING(out) + n, 0, (size_t)(c->b - n));
    return out;
}

/* "E-" and the decimal digits of scale (from 1 to 99 as columns declare it, any positive
 * value written right), where text has room for 22 characters: how many it wrote. */
static int
exponent_text(char *text, long long scale)
{
    char digits[20];
    int n = 0;
    unsigned long long v = (unsigned long long)scale;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    text[0] = 'E', text[1] = '-';
    for (int i = 0; i < n; i++)
        text[2 + i] = digits[n - 1 - i];
    return 2 + n;
}

/* DECIMAL: the digit string, as decimals.decimal_source builds it, given to Decimal(). */
static PyObject *
decimal_value(const Column *c, const unsigned char *s, Py_ssize_t size)
{
    unsigned char raw[MAX_DECIMAL_BYTES];
    char text[MAX_GROUPS * 9 + 32];
    int negative = !(s[0] & 0x80);
    for (Py_ssize_t i = 0; i < size; i++)
        raw[i] = negative ? (unsigned char)~s[i] : s[i];
    raw[0] ^= 0x80;   /* the sign bit, flipped back by the inversion above when negative */
    int len = 1, at = 0;
    for (int g = 0; g < c->groups; g++) {
        int digits = c->group_digits[g];
        unsigned long long v = read_be(raw + at, c->group_bytes[g]);
        at += c->group_bytes[g];
        unsigned long long limit = 1;
        for (int d = 0; d < digits; d++)
            limit *= 10;
        if (v >= limit) {
            PyErr_SetString(PyExc_ValueError, "a DECIMAL group holds more digits than it can");
            return NULL;
        }
        for (int d = digits - 1; d >= 0; d--, v /= 10)
            text[len + d] = (char)('0' + v % 10);
        len += digits;
    }
    int first = 1;
    while (first < len - 1 && text[first] == '0')
        first++;
    if (negative)
        text[--first] = '-';
    if (c->a)  /* "E-<scale>", written without snprintf (4% of a decode of DECIMALs) */
        len += exponent_text(text + len, c->a);
    PyObject *digits = PyUnicode_FromStringAndSize(text + first, len - first);
    if (digits == NULL)
        return NULL;
    PyObject *value = PyObject_CallOneArg(c->obj, digits);
    Py_DECREF(digits);
    return value;
}

static PyObject *
set_value(const Column *c, unsigned long long bits)
{
    Py_ssize_t count = PyTuple_GET_SIZE(c->obj);
    if (count < 64 && bits >> count) {
        PyErr_SetString(PyExc_ValueError, "a SET value has members beyond its labels");
        return NULL;
    }
    PyObject *members = PyList_New(0);
    if (members == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (bits >> i & 1 && PyList_Append(members, PyTuple_GET_ITEM(c->obj, i)) < 0) {
            Py_DECREF(members);
            return NULL;
        }
    }
    PyObject *comma = PyUnicode_FromString(",");
    PyObject *text = comma ? PyUnicode_Join(comma, members) : NULL;
    Py_XDECREF(comma);
    Py_DECREF(members);
    return text;
}

/* A ValueError (the snippets' `except ValueError`) turns into a call of the Python helper. */
static int
caught_value_error(void)
{
    if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_OverflowError))
        return 0;
    PyErr_Clear();
    return 1;
}

static PyObject *
date_value(const Column *c, const unsigned char *s)
{
    long x = (long)read_le(s, 3);
    PyObject *value = PyDate_FromDate((int)(x >> 9), (int)(x >> 5 & 15), (int)(x & 31));
    if (value == NULL && caught_value_error())
        return PyObject_CallFunction(c->obj, "l", x);
    return value;
}

static long long
floor_div(long long a, long long b)
{
    long long q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static PyObject *
datetime2_value(const Column *c, const unsigned char *s)
{
    int fsp = (int)c->a;
    long long h = s[0], m = s[1] << 8 | s[2], l = s[3] << 8 | s[4], micro = 0;
    if (fsp == 1 || fsp == 2)
        micro = s[5] * 10000LL;
    else if (fsp == 3 || fsp == 4)
        micro = (s[5] << 8 | s[6]) * 100LL;
    else if (fsp >= 5)
        micro = (long long)read_be(s + 5, 3);
    long long ym = (h - 128) * 1024 | m >> 6;   /* Python's (_h - 128) << 10 | _m >> 6 */
    long long year = floor_div(ym, 13), month = ym - year * 13;
    PyObject *value = PyDateTime_FromDateAndTime((int)year, (int)month, (int)(m >> 1 & 31),
                                                 (int)(l >> 12 | (m & 1) << 4),
                                                 (int)(l >> 6 & 63), (int)(l & 63), (int)micro);
    if (value != NULL || !caught_value_error())
        return value;
    long long packed = (h << 32 | m << 16 | l) - 0x8000000000LL;
    return PyObject_CallFunction(c->obj, "LLi", packed, micro, fsp);
}

/* Year..second of a Unix time (seconds >= 0) in UTC: days to civil date, proleptic Gregorian. */
static void
utc_fields(long long seconds, int f[6])
{
    long long days = seconds / 86400, rest = seconds % 86400;
    long long z = days + 719468, era = z / 146097, doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    long long month = mp < 10 ? mp + 3 : mp - 9;
    f[0] = (int)(yoe + era * 400 + (month <= 2));
    f[1] = (int)month;
    f[2] = (int)(doy - (153 * mp + 2) / 5 + 1);
    f[3] = (int)(rest / 3600);
    f[4] = (int)(rest / 60 % 60);
    f[5] = (int)(rest % 60);
}

static PyObject *
timestamp2_value(const Column *c, const unsigned char *s)
{
    int fsp = (int)c->a;
    long long seconds = (long long)read_be(s, 4);
    long long micro = (long long)read_be(s + 4, FRAC_BYTES[fsp]) * FRAC_SCALE[fsp];
    if (seconds == 0 || micro >= 1000000)
        return PyObject_CallFunction(c->obj, "LLi", seconds, micro, fsp);
    int f[6];
    utc_fields(seconds, f);
    return PyDateTimeAPI->DateTime_FromDateAndTime(f[0], f[1], f[2], f[3], f[4], f[5], (int)micro,
                                                   c->obj2, PyDateTimeAPI->DateTimeType);
}

static PyObject *
time2_value(const Column *c, const unsigned char *s)
{
    int fsp = (int)c->a;
    long long packed;
    if (fsp >= 5)
        packed = (long long)read_be(s, 6) - 0x800000000000LL;
    else {
        long long intpart = (long long)read_be(s, 3) - 0x800000;
        int size = FRAC_BYTES[fsp];
        long long frac = (long long)read_be(s + 3, size);
        if (intpart < 0 && frac) {
            intpart += 1;
            frac -= 1LL << (8 * size);
        }
        packed = intpart * (1LL << 24) + frac * FRAC_SCALE[fsp];
    }
    long long magnitude = packed < 0 ? -packed : packed;
    long long intpart = magnitude >> 24, micro = magnitude & 0xFFFFFF;
    long long hour = intpart >> 12, minute = intpart >> 6 & 63, second = intpart & 63;
    if (hour > 1023 || minute > 59 || second > 59 || micro >= 1000000) {
        PyErr_SetString(PyExc_ValueError, "TIME fields are out of range");
        return NULL;
    }
    long long total = ((hour * 60 + minute) * 60 + second) * 1000000 + micro;
    if (packed < 0)
        total = -total;
    long long days = floor_div(total, 86400000000LL), rest = total - days * 86400000000LL;
    return PyDelta_FromDSU((int)days, (int)(rest / 1000000), (int)(rest % 1000000));
}

/* The size of a fixed-size op's value, or -1 when it is length-prefixed or Python's. */
static Py_ssize_t
fixed_size(const Column *c)
{
    switch (c->op) {
    case OP_INT: case OP_FLOAT: case OP_ENUM: case OP_SET: return (Py_ssize_t)c->a;
    case OP_YEAR: return 1;
    case OP_DATE: return 3;
    case OP_BIT: return (Py_ssize_t)((c->a + 7) / 8);
    case OP_DATETIME2: return 5 + FRAC_BYTES[c->a];
    case OP_TIMESTAMP2: return 4 + FRAC_BYTES[c->a];
    case OP_TIME2: return 3 + FRAC_BYTES[c->a];
    case OP_DECIMAL: return (Py_ssize_t)c->b;
    default: return -1;
    }
}

static PyObject *
fixed_value(const Column *c, const unsigned char *s, Py_ssize_t size)
{
    switch (c->op) {
    case OP_INT: return int_value(c, s);
    case OP_FLOAT:
        return PyFloat_FromDouble(size == 4 ? PyFloat_Unpack4((const char *)s, 1)
                                            : PyFloat_Unpack8((const char *)s, 1));
    case OP_YEAR: return PyLong_FromLong(s[0] ? s[0] + 1900 : 0);
    case OP_BIT: {
        unsigned long long v = read_be(s, (int)size);
        if (c->a < 64 && v >> c->a) {
            PyErr_SetString(PyExc_ValueError, "a BIT value has bits beyond its width");
            return NULL;
        }
        return PyLong_FromUnsignedLongLong(v);
    }
    case OP_ENUM: {
        Py_ssize_t i = (Py_ssize_t)read_le(s, (int)size);
        if (i >= PyTuple_GET_SIZE(c->obj)) {
            PyErr_SetString(PyExc_IndexError, "an ENUM value beyond its labels");
            return NULL;
        }
        return Py_NewRef(PyTuple_GET_ITEM(c->obj, i));
    }
    case OP_SET: return set_value(c, read_le(s, (int)size));
    case OP_DATE: return date_value(c, s);
    case OP_DATETIME2: return datetime2_value(c, s);
    case OP_TIMESTAMP2: return timestamp2_value(c, s);
    case OP_TIME2: return time2_value(c, s);
    case OP_DECIMAL: return decimal_value(c, s, size);
    default: return PyErr_Format(PyExc_SystemError, "row plan op %d", c->op);
    }
}

static PyObject *
value_at(const Column *c, const Buffer *buf, Py_ssize_t *p)
{
    if (c->op == OP_PYTHON)
        return call_python(c, buf, p);
    const unsigned char *s = buf->data + *p;
    Py_ssize_t left = buf->size - *p;
    if (c->op == OP_BYTES || c->op == OP_TEXT) {
        int prefix = (int)c->a;
        if (left < prefix)
            return overrun();
        Py_ssize_t n = (Py_ssize_t)read_le(s, prefix);
        if (n > left - prefix)
            return overrun();
        *p += prefix + n;
        return c->op == OP_TEXT ? text_value(c, s + prefix, n) : bytes_value(c, s + prefix, n);
    }
    Py_ssize_t size = fixed_size(c);
    if (size < 0 || left < size)
        return overrun();
    *p += size;
    return fixed_value(c, s, size);
}

#endif
