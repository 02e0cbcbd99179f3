/*
 * kafkasim.records._codec: the C fast path of kafkasim/records/record_batch.py and columns.py (records payload, FORMAT.md §2.2).
 *
 * Two jobs, nothing else:
 *
 *   pack_records(records, with_deltas) -> (payload: bytes, min_ts, max_ts) | None
 *       The msgpack payload of a batch, byte-for-byte what msgpack-python's
 *       Packer(use_bin_type=True) writes for [(delta, ts - first_ts, key, value, headers or ()), ...].
 *       `records` is a list/tuple of (ts, key, value, headers) (deltas 0..n-1) or, with
 *       with_deltas, of (delta, ts, key, value, headers). Returns None — and the caller takes
 *       the pure-Python path, which gives the same bytes or the proper error — for anything
 *       outside the common shape: non-exact types, bytes header keys, ints beyond int64,
 *       and headers None with with_deltas (the Python path packs that as nil).
 *
 *   ArrowColumns(): accumulates the records of verified batches as Arrow buffers
 *       (Arrow columnar format: little-endian, int32 offsets, LSB-first validity bitmaps),
 *       so a columnar reader builds pyarrow arrays with no Python object per record.
 *       add(buf, start, end, record_count, last_offset_delta) decodes one payload with the
 *       checks of FORMAT.md §2.3 (count, five fields, types, increasing deltas within
 *       last_offset_delta, nothing left over) and raises ValueError naming the problem;
 *       on error nothing of that batch is kept.
 *
 * Invariants: the pure-Python code in record_batch.py is the reference; tests compare the
 * two on generated input. Thread-safety: pack_records holds the GIL throughout and keeps
 * no state; an ArrowColumns object is not safe to share between threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ encoder */

static Py_ssize_t int_size(int64_t v) {
    if (v >= 0) {
        if (v < 128) return 1;
        if (v < 256) return 2;
        if (v < 65536) return 3;
        if (v <= 0xffffffffLL) return 5;
        return 9;
    }
    if (v >= -32) return 1;
    if (v >= -128) return 2;
    if (v >= -32768) return 3;
    if (v >= -2147483648LL) return 5;
    return 9;
}

static inline unsigned char *put_be(unsigned char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) { p[i] = (unsigned char)(v & 0xff); v >>= 8; }
    return p + n;
}

static unsigned char *put_int(unsigned char *p, int64_t v) {
    if (v >= 0) {
        if (v < 128) { *p++ = (unsigned char)v; return p; }
        if (v < 256) { *p++ = 0xcc; return put_be(p, (uint64_t)v, 1); }
        if (v < 65536) { *p++ = 0xcd; return put_be(p, (uint64_t)v, 2); }
        if (v <= 0xffffffffLL) { *p++ = 0xce; return put_be(p, (uint64_t)v, 4); }
        *p++ = 0xcf; return put_be(p, (uint64_t)v, 8);
    }
    if (v >= -32) { *p++ = (unsigned char)(v & 0xff); return p; }
    if (v >= -128) { *p++ = 0xd0; return put_be(p, (uint64_t)v, 1); }
    if (v >= -32768) { *p++ = 0xd1; return put_be(p, (uint64_t)v, 2); }
    if (v >= -2147483648LL) { *p++ = 0xd2; return put_be(p, (uint64_t)v, 4); }
    *p++ = 0xd3; return put_be(p, (uint64_t)v, 8);
}

static Py_ssize_t array_head_size(Py_ssize_t n) { return n < 16 ? 1 : (n < 65536 ? 3 : 5); }

static unsigned char *put_array_head(unsigned char *p, Py_ssize_t n) {
    if (n < 16) { *p++ = (unsigned char)(0x90 | n); return p; }
    if (n < 65536) { *p++ = 0xdc; return put_be(p, (uint64_t)n, 2); }
    *p++ = 0xdd; return put_be(p, (uint64_t)n, 4);
}

static Py_ssize_t bin_size(Py_ssize_t n) { return n + (n < 256 ? 2 : (n < 65536 ? 3 : 5)); }

static unsigned char *put_bin(unsigned char *p, const char *s, Py_ssize_t n) {
    if (n < 256) { *p++ = 0xc4; p = put_be(p, (uint64_t)n, 1); }
    else if (n < 65536) { *p++ = 0xc5; p = put_be(p, (uint64_t)n, 2); }
    else { *p++ = 0xc6; p = put_be(p, (uint64_t)n, 4); }
    memcpy(p, s, (size_t)n);
    return p + n;
}

static Py_ssize_t str_size(Py_ssize_t n) { return n + (n < 32 ? 1 : (n < 256 ? 2 : (n < 65536 ? 3 : 5))); }

static unsigned char *put_str(unsigned char *p, const char *s, Py_ssize_t n) {
    if (n < 32) { *p++ = (unsigned char)(0xa0 | n); }
    else if (n < 256) { *p++ = 0xd9; p = put_be(p, (uint64_t)n, 1); }
    else if (n < 65536) { *p++ = 0xda; p = put_be(p, (uint64_t)n, 2); }
    else { *p++ = 0xdb; p = put_be(p, (uint64_t)n, 4); }
    memcpy(p, s, (size_t)n);
    return p + n;
}

/* An exact int that fits int64 into *out: 1; anything else: 0 (error state cleared). */
static int exact_int64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    *out = (int64_t)v;
    return 1;
}

/* bytes or None: size of its encoding, or -1 when the caller must decline. */
static Py_ssize_t blob_size(PyObject *o) {
    if (o == Py_None) return 1;
    if (!PyBytes_CheckExact(o)) return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n > 0xffffffffLL) return -1;
    return bin_size(n);
}

static unsigned char *put_blob(unsigned char *p, PyObject *o) {
    if (o == Py_None) { *p++ = 0xc0; return p; }
    return put_bin(p, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
}

/* headers (None, or a tuple/list of (str, bytes | None) pairs): encoded size, or -1 to decline. */
static Py_ssize_t headers_size(PyObject *h, int none_ok) {
    if (h == Py_None) return none_ok ? 1 : -1;
    if (!PyTuple_CheckExact(h) && !PyList_CheckExact(h)) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h);
    if (n > 0xffffffffLL) return -1;
    Py_ssize_t total = array_head_size(n);
    PyObject **items = PySequence_Fast_ITEMS(h);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = items[i];
        if ((!PyTuple_CheckExact(pair) && !PyList_CheckExact(pair)) || PySequence_Fast_GET_SIZE(pair) != 2)
            return -1;
        PyObject *k = PySequence_Fast_ITEMS(pair)[0], *v = PySequence_Fast_ITEMS(pair)[1];
        if (!PyUnicode_CheckExact(k)) return -1;
        Py_ssize_t kn;
        if (PyUnicode_AsUTF8AndSize(k, &kn) == NULL) { PyErr_Clear(); return -1; }
        Py_ssize_t vs = blob_size(v);
        if (vs < 0 || kn > 0xffffffffLL) return -1;
        total += 1 + str_size(kn) + vs;
    }
    return total;
}

static unsigned char *put_headers(unsigned char *p, PyObject *h) {
    if (h == Py_None) { *p++ = 0x90; return p; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h);
    p = put_array_head(p, n);
    PyObject **items = PySequence_Fast_ITEMS(h);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **kv = PySequence_Fast_ITEMS(items[i]);
        Py_ssize_t kn;
        const char *ks = PyUnicode_AsUTF8AndSize(kv[0], &kn);  /* cached by headers_size */
        *p++ = 0x92;
        p = put_str(p, ks, kn);
        p = put_blob(p, kv[1]);
    }
    return p;
}

static PyObject *pack_records(PyObject *self, PyObject *args) {
    PyObject *records;
    int with_deltas;
    if (!PyArg_ParseTuple(args, "Op", &records, &with_deltas)) return NULL;
    if (!PyList_CheckExact(records) && !PyTuple_CheckExact(records)) Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(records);
    if (n == 0 || n > 0xffffffffLL) Py_RETURN_NONE;
    PyObject **recs = PySequence_Fast_ITEMS(records);
    const Py_ssize_t width = with_deltas ? 5 : 4, ts_at = with_deltas ? 1 : 0;

    /* pass 1: shapes, types and the exact size */
    int64_t first_ts = 0, min_ts = 0, max_ts = 0;
    Py_ssize_t total = array_head_size(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = recs[i];
        if ((!PyTuple_CheckExact(r) && !PyList_CheckExact(r)) || PySequence_Fast_GET_SIZE(r) != width)
            Py_RETURN_NONE;
        PyObject **f = PySequence_Fast_ITEMS(r);
        int64_t ts, delta = i;
        if (!exact_int64(f[ts_at], &ts)) Py_RETURN_NONE;
        if (with_deltas && !exact_int64(f[0], &delta)) Py_RETURN_NONE;
        if (i == 0) { first_ts = min_ts = max_ts = ts; }
        if (ts < min_ts) min_ts = ts;
        if (ts > max_ts) max_ts = ts;
        int64_t tsd;
        if (__builtin_sub_overflow(ts, first_ts, &tsd)) Py_RETURN_NONE;
        Py_ssize_t ks = blob_size(f[ts_at + 1]), vs = blob_size(f[ts_at + 2]), hs = headers_size(f[ts_at + 3], !with_deltas);
        if (ks < 0 || vs < 0 || hs < 0) Py_RETURN_NONE;
        total += 1 + int_size(delta) + int_size(tsd) + ks + vs + hs;
    }

    /* pass 2: write */
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    p = put_array_head(p, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = PySequence_Fast_ITEMS(recs[i]);
        int64_t ts, delta = i;
        exact_int64(f[ts_at], &ts);
        if (with_deltas) exact_int64(f[0], &delta);
        *p++ = 0x95;
        p = put_int(p, delta);
        p = put_int(p, ts - first_ts);
        p = put_blob(p, f[ts_at + 1]);
        p = put_blob(p, f[ts_at + 2]);
        p = put_headers(p, f[ts_at + 3]);
    }
    if ((Py_ssize_t)(p - (unsigned char *)PyBytes_AS_STRING(out)) != total) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "kafkasim.records._codec.pack_records: size mismatch");
        return NULL;
    }
    return Py_BuildValue("(NLL)", out, (long long)min_ts, (long long)max_ts);
}

/* ------------------------------------------------------------------ decoder */

typedef struct { char *data; Py_ssize_t len, cap; } Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *d = PyMem_Realloc(b->data, (size_t)cap);
    if (d == NULL) { PyErr_NoMemory(); return -1; }
    b->data = d;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* A binary/string Arrow column: validity bitmap (kept only once a null shows up),
 * int32 offsets (count + 1 of them) and data. */
typedef struct { Buf valid, offsets, data; Py_ssize_t count, nulls; } BinCol;

static int bincol_init(BinCol *c) {
    int32_t zero = 0;
    return buf_put(&c->offsets, &zero, 4);
}

static int bincol_add(BinCol *c, const char *s, Py_ssize_t n, int is_null) {
    if (is_null && c->nulls == 0) {       /* first null: materialise the bitmap, all valid so far */
        Py_ssize_t bytes = (c->count + 8) / 8 + 1;
        if (buf_reserve(&c->valid, bytes) < 0) return -1;
        memset(c->valid.data, 0, (size_t)c->valid.cap);
        for (Py_ssize_t i = 0; i < c->count; i++) c->valid.data[i >> 3] |= (char)(1 << (i & 7));
        c->valid.len = (c->count + 7) / 8;
    }
    if (c->nulls || is_null) {
        Py_ssize_t need = (c->count >> 3) + 1;
        if (need > c->valid.len) {
            if (buf_reserve(&c->valid, need - c->valid.len) < 0) return -1;
            memset(c->valid.data + c->valid.len, 0, (size_t)(need - c->valid.len));
            c->valid.len = need;
        }
        if (!is_null) c->valid.data[c->count >> 3] |= (char)(1 << (c->count & 7));
    }
    if (is_null) c->nulls++;
    Py_ssize_t end = (c->data.len + n);
    if (end > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "column data over 2 GiB: flush earlier"); return -1; }
    if (n && buf_put(&c->data, s, n) < 0) return -1;
    int32_t off = (int32_t)end;
    if (buf_put(&c->offsets, &off, 4) < 0) return -1;
    c->count++;
    return 0;
}

static void bincol_truncate(BinCol *c, Py_ssize_t count, Py_ssize_t nulls) {
    c->count = count;
    c->nulls = nulls;
    c->offsets.len = 4 * (count + 1);
    c->data.len = ((int32_t *)c->offsets.data)[count];
    if (nulls == 0) c->valid.len = 0;
    else {
        c->valid.len = (count + 7) / 8;
        if (count & 7) c->valid.data[count >> 3] &= (char)((1 << (count & 7)) - 1);
    }
}

static void bincol_free(BinCol *c) {
    PyMem_Free(c->valid.data); PyMem_Free(c->offsets.data); PyMem_Free(c->data.data);
    memset(c, 0, sizeof(*c));
}

typedef struct {
    PyObject_HEAD
    Buf deltas, tsds, hdr_offsets;   /* int64, int64, int32 (rows + 1) */
    BinCol keys, values, hkeys, hvalues;
    Py_ssize_t rows;
} ArrowColumns;

static int ac_reset(ArrowColumns *self) {
    PyMem_Free(self->deltas.data); PyMem_Free(self->tsds.data); PyMem_Free(self->hdr_offsets.data);
    memset(&self->deltas, 0, sizeof(Buf)); memset(&self->tsds, 0, sizeof(Buf));
    memset(&self->hdr_offsets, 0, sizeof(Buf));
    bincol_free(&self->keys); bincol_free(&self->values);
    bincol_free(&self->hkeys); bincol_free(&self->hvalues);
    self->rows = 0;
    int32_t zero = 0;
    if (buf_put(&self->hdr_offsets, &zero, 4) < 0) return -1;
    if (bincol_init(&self->keys) < 0 || bincol_init(&self->values) < 0
        || bincol_init(&self->hkeys) < 0 || bincol_init(&self->hvalues) < 0) return -1;
    return 0;
}

static int ac_init(ArrowColumns *self, PyObject *args, PyObject *kw) {
    if (!PyArg_ParseTuple(args, ":ArrowColumns")) return -1;
    return ac_reset(self);
}

static void ac_dealloc(ArrowColumns *self) {
    PyMem_Free(self->deltas.data); PyMem_Free(self->tsds.data); PyMem_Free(self->hdr_offsets.data);
    bincol_free(&self->keys); bincol_free(&self->values);
    bincol_free(&self->hkeys); bincol_free(&self->hvalues);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A msgpack reader over [p, end) that records the first problem in *err. */
typedef struct { const unsigned char *p, *end; const char *err; } Rd;

static int rd_need(Rd *r, Py_ssize_t n) {
    if (r->end - r->p < n) { r->err = "payload ends inside a value"; return 0; }
    return 1;
}

static uint64_t rd_be(Rd *r, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | r->p[i];
    r->p += n;
    return v;
}

static int rd_array(Rd *r, Py_ssize_t *n) {
    if (!rd_need(r, 1)) return 0;
    unsigned char t = *r->p++;
    if ((t & 0xf0) == 0x90) { *n = t & 0x0f; return 1; }
    if (t == 0xdc && rd_need(r, 2)) { *n = (Py_ssize_t)rd_be(r, 2); return 1; }
    if (t == 0xdd && rd_need(r, 4)) { *n = (Py_ssize_t)rd_be(r, 4); return 1; }
    if (!r->err) r->err = "expected an array";
    return 0;
}

static int rd_int(Rd *r, int64_t *v) {
    if (!rd_need(r, 1)) return 0;
    unsigned char t = *r->p++;
    if (t < 0x80) { *v = t; return 1; }
    if (t >= 0xe0) { *v = (int8_t)t; return 1; }
    int n = 0, sign = 0;
    switch (t) {
        case 0xcc: n = 1; break; case 0xcd: n = 2; break; case 0xce: n = 4; break; case 0xcf: n = 8; break;
        case 0xd0: n = 1; sign = 1; break; case 0xd1: n = 2; sign = 1; break;
        case 0xd2: n = 4; sign = 1; break; case 0xd3: n = 8; sign = 1; break;
        default: r->err = "expected an integer"; return 0;
    }
    if (!rd_need(r, n)) return 0;
    uint64_t u = rd_be(r, n);
    if (sign) {
        if (n == 1) *v = (int8_t)u; else if (n == 2) *v = (int16_t)u;
        else if (n == 4) *v = (int32_t)u; else *v = (int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) { r->err = "integer beyond int64"; return 0; }
        *v = (int64_t)u;
    }
    return 1;
}

/* bin or nil (want_str: str or nil — str checked for UTF-8). *s NULL means nil. */
static int rd_blob(Rd *r, const char **s, Py_ssize_t *n, int want_str) {
    if (!rd_need(r, 1)) return 0;
    unsigned char t = *r->p++;
    Py_ssize_t len;
    if (t == 0xc0) { *s = NULL; *n = 0; return 1; }
    if (!want_str) {
        if (t == 0xc4 && rd_need(r, 1)) len = (Py_ssize_t)rd_be(r, 1);
        else if (t == 0xc5 && rd_need(r, 2)) len = (Py_ssize_t)rd_be(r, 2);
        else if (t == 0xc6 && rd_need(r, 4)) len = (Py_ssize_t)rd_be(r, 4);
        else { if (!r->err) r->err = "expected bin or nil for a key or value"; return 0; }
    } else {
        if ((t & 0xe0) == 0xa0) len = t & 0x1f;
        else if (t == 0xd9 && rd_need(r, 1)) len = (Py_ssize_t)rd_be(r, 1);
        else if (t == 0xda && rd_need(r, 2)) len = (Py_ssize_t)rd_be(r, 2);
        else if (t == 0xdb && rd_need(r, 4)) len = (Py_ssize_t)rd_be(r, 4);
        else { if (!r->err) r->err = "expected str for a header key"; return 0; }
    }
    if (!rd_need(r, len)) return 0;
    *s = (const char *)r->p;
    *n = len;
    r->p += len;
    if (want_str) {
        PyObject *u = PyUnicode_DecodeUTF8(*s, len, "strict");
        if (u == NULL) { PyErr_Clear(); r->err = "header key is not valid UTF-8"; return 0; }
        Py_DECREF(u);
    }
    return 1;
}

static PyObject *ac_add(ArrowColumns *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long last_delta;
    if (!PyArg_ParseTuple(args, "y*nnnL", &view, &start, &end, &count, &last_delta)) return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "payload range [%zd, %zd) outside a buffer of %zd bytes", start, end, view.len);
        return NULL;
    }
    /* remember where every column stood, to undo a half-decoded batch */
    Py_ssize_t rows0 = self->rows, hrows0 = self->hkeys.count;
    Py_ssize_t knull0 = self->keys.nulls, vnull0 = self->values.nulls, hvnull0 = self->hvalues.nulls;
    Rd r = {(const unsigned char *)view.buf + start, (const unsigned char *)view.buf + end, NULL};
    const char *problem = NULL;
    Py_ssize_t n = 0;
    int64_t prev = -1;
    int failed = 0;   /* a Python error (memory) is set */
    if (!rd_array(&r, &n)) problem = r.err;
    else if (n != count) problem = "record count differs from the header";
    else if (n > (end - start) / 6) problem = "record count larger than the payload can hold";
    if (!problem && (buf_reserve(&self->deltas, 8 * n) < 0 || buf_reserve(&self->tsds, 8 * n) < 0
                     || buf_reserve(&self->hdr_offsets, 4 * n) < 0)) failed = 1;
    for (Py_ssize_t i = 0; !problem && !failed && i < n; i++) {
        Py_ssize_t fields, nh;
        int64_t delta, tsd;
        const char *ks, *vs;
        Py_ssize_t kn, vn;
        if (!rd_array(&r, &fields)) { problem = r.err; break; }
        if (fields != 5) { problem = "a record must have 5 fields"; break; }
        if (!rd_int(&r, &delta) || !rd_int(&r, &tsd)) { problem = r.err; break; }
        if (delta <= prev || delta > last_delta) { problem = "offset deltas must increase within last_offset_delta"; break; }
        prev = delta;
        if (!rd_blob(&r, &ks, &kn, 0) || !rd_blob(&r, &vs, &vn, 0)) { problem = r.err; break; }
        if (!rd_array(&r, &nh)) { problem = r.err; break; }
        for (Py_ssize_t j = 0; j < nh; j++) {
            Py_ssize_t two, hkn, hvn;
            const char *hks, *hvs;
            if (!rd_array(&r, &two)) { problem = r.err; break; }
            if (two != 2) { problem = "a header must be a [key, value] pair"; break; }
            if (!rd_blob(&r, &hks, &hkn, 1)) { problem = r.err; break; }
            if (hks == NULL) { problem = "a header key must not be nil"; break; }
            if (!rd_blob(&r, &hvs, &hvn, 0)) { problem = r.err; break; }
            if (bincol_add(&self->hkeys, hks, hkn, 0) < 0 || bincol_add(&self->hvalues, hvs, hvn, hvs == NULL) < 0) {
                failed = 1; break;
            }
        }
        if (problem || failed) break;
        if (bincol_add(&self->keys, ks, kn, ks == NULL) < 0 || bincol_add(&self->values, vs, vn, vs == NULL) < 0) {
            failed = 1; break;
        }
        memcpy(self->deltas.data + self->deltas.len, &delta, 8); self->deltas.len += 8;
        memcpy(self->tsds.data + self->tsds.len, &tsd, 8); self->tsds.len += 8;
        int32_t hoff = (int32_t)self->hkeys.count;
        memcpy(self->hdr_offsets.data + self->hdr_offsets.len, &hoff, 4); self->hdr_offsets.len += 4;
        self->rows++;
    }
    if (!problem && !failed && r.p != r.end) problem = "bytes left over after the last record";
    PyBuffer_Release(&view);
    if (problem || failed) {
        self->rows = rows0;
        self->deltas.len = self->tsds.len = 8 * rows0;
        self->hdr_offsets.len = 4 * (rows0 + 1);
        bincol_truncate(&self->keys, rows0, knull0);
        bincol_truncate(&self->values, rows0, vnull0);
        bincol_truncate(&self->hkeys, hrows0, 0);
        bincol_truncate(&self->hvalues, hrows0, hvnull0);
        if (failed) return NULL;
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    return PyLong_FromSsize_t(n);
}

static PyObject *buf_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->len); }

static PyObject *bincol_tuple(BinCol *c) {
    PyObject *valid;
    if (c->nulls) valid = buf_bytes(&c->valid);
    else { valid = Py_None; Py_INCREF(valid); }
    return Py_BuildValue("(NNNn)", valid, buf_bytes(&c->offsets), buf_bytes(&c->data), c->nulls);
}

static PyObject *ac_take(ArrowColumns *self, PyObject *unused) {
    PyObject *res = Py_BuildValue("{s:n,s:N,s:N,s:N,s:N,s:N,s:N,s:N}",
        "rows", self->rows,
        "offset_deltas", buf_bytes(&self->deltas),
        "timestamp_deltas", buf_bytes(&self->tsds),
        "keys", bincol_tuple(&self->keys),
        "values", bincol_tuple(&self->values),
        "header_offsets", buf_bytes(&self->hdr_offsets),
        "header_keys", bincol_tuple(&self->hkeys),
        "header_values", bincol_tuple(&self->hvalues));
    if (res == NULL) return NULL;
    if (ac_reset(self) < 0) { Py_DECREF(res); return NULL; }
    return res;
}

static PyObject *ac_get_rows(ArrowColumns *self, void *closure) { return PyLong_FromSsize_t(self->rows); }

static PyObject *ac_get_nbytes(ArrowColumns *self, void *closure) {
    return PyLong_FromSsize_t(self->keys.data.len + self->values.data.len
                              + self->hkeys.data.len + self->hvalues.data.len);
}

static PyMethodDef ac_methods[] = {
    {"add", (PyCFunction)ac_add, METH_VARARGS,
     "add(buf, start, end, record_count, last_offset_delta) -> records added; ValueError if malformed"},
    {"take", (PyCFunction)ac_take, METH_NOARGS,
     "take() -> dict of Arrow buffers for every record added since the last take; resets"},
    {NULL}
};

static PyGetSetDef ac_getset[] = {
    {"rows", (getter)ac_get_rows, NULL, "records held", NULL},
    {"nbytes", (getter)ac_get_nbytes, NULL, "bytes of key, value and header data held", NULL},
    {NULL}
};

static PyTypeObject ArrowColumnsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkasim.records._codec.ArrowColumns",
    .tp_basicsize = sizeof(ArrowColumns),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Records of verified batches accumulated as Arrow buffers (see module doc).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ac_init,
    .tp_dealloc = (destructor)ac_dealloc,
    .tp_methods = ac_methods,
    .tp_getset = ac_getset,
};

static PyMethodDef module_methods[] = {
    {"pack_records", pack_records, METH_VARARGS,
     "pack_records(records, with_deltas) -> (payload, min_ts, max_ts) or None (see module doc)"},
    {NULL}
};

static struct PyModuleDef codec_module = {
    PyModuleDef_HEAD_INIT, "kafkasim.records._codec",
    "C fast path of kafkasim.records (record_batch and columns): the records payload (FORMAT.md §2.2).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__codec(void) {
    if (PyType_Ready(&ArrowColumnsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&codec_module);
    if (m == NULL) return NULL;
    Py_INCREF(&ArrowColumnsType);
    if (PyModule_AddObject(m, "ArrowColumns", (PyObject *)&ArrowColumnsType) < 0) {
        Py_DECREF(&ArrowColumnsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
