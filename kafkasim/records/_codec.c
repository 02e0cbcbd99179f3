/*
 * kafkasim.records._codec: the C fast path of kafkasim/records/record_batch.py and columns.py:
 * the *records section* of a Kafka record batch v2 (what follows the 61-byte batch header,
 * uncompressed: records back to back, no array head).
 *
 * One record (every varint/varlong zigzag-encoded, as protobuf sint32/sint64):
 *   length varint (bytes after this field) | attributes int8 | timestampDelta varlong |
 *   offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
 *   headerCount varint | per header: keyLength varint | key (UTF-8) | valueLength varint (-1 = null) | value
 *
 * Four jobs, nothing else:
 *
 *   pack_records(records, with_deltas) -> (records_section: bytes, min_ts, max_ts) | None
 *       The records section of a batch, byte-for-byte what Kafka's (and kafka-python's) builder
 *       writes: attributes 0, timestampDelta = ts - records[0].ts. `records` is a list/tuple of
 *       (ts, key, value, headers) (offset deltas 0..n-1; headers None or () = none) or, with
 *       with_deltas, of (delta, ts, key, value, headers). key/value bytes or None; headers a
 *       tuple/list of (str, bytes | None) pairs. Returns None -- and the caller takes the
 *       pure-Python path, which gives the same bytes or the proper error -- for anything outside
 *       exact types, ints beyond int64 (offset deltas beyond int32), lengths beyond int32, and
 *       headers None with with_deltas.
 *
 *   ArrowColumns(): accumulates the records of verified batches as Arrow buffers (Arrow columnar
 *       format: little-endian, int32 offsets, LSB-first validity bitmaps), so a columnar reader
 *       builds pyarrow arrays with no Python object per record.
 *       add(buf, start, end, record_count, last_offset_delta, fixed_tsd=None) decodes the
 *       records in buf[start:end]; fixed_tsd (int or None), when given, is reported as every
 *       record's timestamp delta (LogAppendTime batches). take() hands out and resets the buffers;
 *       rows / nbytes say what is held.
 *
 *   decode_columns(buf, start, end, record_count, last_offset_delta, fixed_tsd=None)
 *       -> (offset_deltas, timestamp_deltas, keys, values, headers): five tuples built directly;
 *       headers () or a tuple of (str, bytes | None) tuples.
 *
 *   scan_records(buf, start, end, record_count, last_offset_delta)
 *       -> (min_tsd, max_tsd, null_key_count, contiguous), no Python object per record;
 *       contiguous is True when the offset deltas are exactly 0..n-1. (0, 0, 0, True) for n == 0.
 *
 * Checks (all three readers, the same ones, in the same order; Kafka's DefaultRecord.readFrom
 * plus the produce-path checks): length varint, body within the section and consumed exactly;
 * varint longer than 5 bytes / varlong longer than 10 bytes is an overflow (a 5th/10th byte's
 * bits beyond 32/64 are dropped, as Java's shifts do); key/value length -1 = null, < -1 invalid;
 * header count >= 0; header key length >= 0 and valid UTF-8 (strict, as Python decodes);
 * header value length -1 = null, < -1 invalid; record count equals record_count, nothing left
 * over; offset deltas strictly increase from >= 0 and stay <= last_offset_delta. A problem
 * raises ValueError naming it, the record index and its byte position relative to `start`.
 *
 * Invariants: a rejected batch leaves nothing behind. ArrowColumns.add validates the whole
 * section in a first pass and only then reserves and writes (a failed add, including a
 * MemoryError/OverflowError from reserving, leaves rows and every buffer as they were).
 * Thread-safety: the functions hold the GIL throughout and keep no state; an ArrowColumns
 * object is not safe to share between threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ varints */

static inline uint64_t zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
}

static inline Py_ssize_t uvarint_size(uint64_t u) {
    Py_ssize_t n = 1;
    while (u >= 0x80) { u >>= 7; n++; }
    return n;
}

static inline Py_ssize_t varint_size(int64_t v) { return uvarint_size(zigzag(v)); }

static inline unsigned char *put_varint(unsigned char *p, int64_t v) {
    uint64_t u = zigzag(v);
    while (u >= 0x80) { *p++ = (unsigned char)(u | 0x80); u >>= 7; }
    *p++ = (unsigned char)u;
    return p;
}

/* ------------------------------------------------------------------ encoder */

/* An exact int that fits int64 into *out: 1; anything else: 0 (error state cleared). */
static int exact_int64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    *out = (int64_t)v;
    return 1;
}

/* bytes or None: size of its encoding (length varint + data), or -1 when the caller must decline. */
static Py_ssize_t blob_size(PyObject *o) {
    if (o == Py_None) return 1;
    if (!PyBytes_CheckExact(o)) return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n > INT32_MAX) return -1;
    return varint_size(n) + n;
}

static unsigned char *put_blob(unsigned char *p, PyObject *o) {
    if (o == Py_None) return put_varint(p, -1);
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    p = put_varint(p, n);
    memcpy(p, PyBytes_AS_STRING(o), (size_t)n);
    return p + n;
}

/* headers (None, or a tuple/list of (str, bytes | None) pairs): encoded size (count varint
 * included), or -1 to decline. */
static Py_ssize_t headers_size(PyObject *h, int none_ok) {
    if (h == Py_None) return none_ok ? 1 : -1;
    if (!PyTuple_CheckExact(h) && !PyList_CheckExact(h)) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h);
    if (n > INT32_MAX) return -1;
    Py_ssize_t total = varint_size(n);
    PyObject **items = PySequence_Fast_ITEMS(h);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = items[i];
        if ((!PyTuple_CheckExact(pair) && !PyList_CheckExact(pair)) || PySequence_Fast_GET_SIZE(pair) != 2)
            return -1;
        PyObject *k = PySequence_Fast_ITEMS(pair)[0], *v = PySequence_Fast_ITEMS(pair)[1];
        if (!PyUnicode_CheckExact(k)) return -1;
        Py_ssize_t kn;
        if (PyUnicode_AsUTF8AndSize(k, &kn) == NULL) { PyErr_Clear(); return -1; }  /* lone surrogates */
        Py_ssize_t vs = blob_size(v);
        if (vs < 0 || kn > INT32_MAX) return -1;
        total += varint_size(kn) + kn + vs;
    }
    return total;
}

static unsigned char *put_headers(unsigned char *p, PyObject *h) {
    if (h == Py_None) return put_varint(p, 0);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h);
    p = put_varint(p, n);
    PyObject **items = PySequence_Fast_ITEMS(h);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **kv = PySequence_Fast_ITEMS(items[i]);
        Py_ssize_t kn;
        const char *ks = PyUnicode_AsUTF8AndSize(kv[0], &kn);  /* cached by headers_size */
        p = put_varint(p, kn);
        memcpy(p, ks, (size_t)kn);
        p += kn;
        p = put_blob(p, kv[1]);
    }
    return p;
}

/* The body size of record `f` (a checked record), the bytes after its length varint. */
static Py_ssize_t body_size(PyObject **f, Py_ssize_t ts_at, int64_t delta, int64_t tsd, int with_deltas) {
    Py_ssize_t ks = blob_size(f[ts_at + 1]), vs = blob_size(f[ts_at + 2]);
    Py_ssize_t hs = headers_size(f[ts_at + 3], !with_deltas);
    if (ks < 0 || vs < 0 || hs < 0) return -1;
    return 1 + varint_size(tsd) + varint_size(delta) + ks + vs + hs;
}

static PyObject *pack_records(PyObject *self, PyObject *args) {
    PyObject *records;
    int with_deltas;
    if (!PyArg_ParseTuple(args, "Op", &records, &with_deltas)) return NULL;
    if (!PyList_CheckExact(records) && !PyTuple_CheckExact(records)) Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(records);
    if (n == 0 || n > INT32_MAX) Py_RETURN_NONE;
    PyObject **recs = PySequence_Fast_ITEMS(records);
    const Py_ssize_t width = with_deltas ? 5 : 4, ts_at = with_deltas ? 1 : 0;

    /* pass 1: shapes, types and the exact size; each record's timestamp delta, offset delta
     * and body size are kept for pass 2 (one int64 conversion and one size walk per record) */
    typedef struct { int64_t tsd, delta; Py_ssize_t body; } Plan;
    Plan *plan = PyMem_Malloc((size_t)n * sizeof(Plan));
    if (plan == NULL) return PyErr_NoMemory();
    int64_t first_ts = 0, min_ts = 0, max_ts = 0;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = recs[i];
        if ((!PyTuple_CheckExact(r) && !PyList_CheckExact(r)) || PySequence_Fast_GET_SIZE(r) != width)
            goto decline;
        PyObject **f = PySequence_Fast_ITEMS(r);
        int64_t ts, delta = i;
        if (!exact_int64(f[ts_at], &ts)) goto decline;
        if (with_deltas && (!exact_int64(f[0], &delta) || delta < INT32_MIN || delta > INT32_MAX))
            goto decline;
        if (i == 0) { first_ts = min_ts = max_ts = ts; }
        if (ts < min_ts) min_ts = ts;
        if (ts > max_ts) max_ts = ts;
        int64_t tsd;
        if (__builtin_sub_overflow(ts, first_ts, &tsd)) goto decline;
        Py_ssize_t body = body_size(f, ts_at, delta, tsd, with_deltas);
        if (body < 0 || body > INT32_MAX) goto decline;
        plan[i].tsd = tsd;
        plan[i].delta = delta;
        plan[i].body = body;
        total += varint_size(body) + body;
    }

    /* pass 2: write (every record passed pass 1, so nothing below can decline) */
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) { PyMem_Free(plan); return NULL; }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = PySequence_Fast_ITEMS(recs[i]);
        p = put_varint(p, plan[i].body);
        *p++ = 0;   /* attributes */
        p = put_varint(p, plan[i].tsd);
        p = put_varint(p, plan[i].delta);
        p = put_blob(p, f[ts_at + 1]);
        p = put_blob(p, f[ts_at + 2]);
        p = put_headers(p, f[ts_at + 3]);
    }
    PyMem_Free(plan);
    if ((Py_ssize_t)(p - (unsigned char *)PyBytes_AS_STRING(out)) != total) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "kafkasim.records._codec.pack_records: size mismatch");
        return NULL;
    }
    return Py_BuildValue("(NLL)", out, (long long)min_ts, (long long)max_ts);
decline:
    PyMem_Free(plan);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ the record reader */

/* Strict UTF-8 (what Python's "strict" decoder accepts): no overlongs, no surrogates, <= U+10FFFF. */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) {
            if (n - i < 2 || (s[i + 1] & 0xc0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            if (n - i < 3 || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80) return 0;
            if (c == 0xe0 && s[i + 1] < 0xa0) return 0;    /* overlong */
            if (c == 0xed && s[i + 1] >= 0xa0) return 0;   /* surrogates */
            i += 3;
        } else if (c >= 0xf0 && c <= 0xf4) {
            if (n - i < 4 || (s[i + 1] & 0xc0) != 0x80 || (s[i + 2] & 0xc0) != 0x80
                || (s[i + 3] & 0xc0) != 0x80) return 0;
            if (c == 0xf0 && s[i + 1] < 0x90) return 0;    /* overlong */
            if (c == 0xf4 && s[i + 1] >= 0x90) return 0;   /* beyond U+10FFFF */
            i += 4;
        } else return 0;
    }
    return 1;
}

/* A reader over [p, end) that records the first problem in err. */
typedef struct { const unsigned char *p, *end; const char *err; } Rd;

/* varint (int32, at most 5 bytes); `what` names the field when the bytes run out */
static inline int rd_varint(Rd *r, int32_t *out, const char *truncated) {
    if (r->p < r->end && *r->p < 0x80) {   /* the common one-byte varint */
        uint32_t b = *r->p++;
        *out = (int32_t)(b >> 1) ^ -(int32_t)(b & 1);
        return 1;
    }
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (r->p >= r->end) { r->err = truncated; return 0; }
        unsigned char b = *r->p++;
        v |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            uint32_t z = (v >> 1) ^ (0u - (v & 1));
            *out = z <= INT32_MAX ? (int32_t)z : -(int32_t)(~z) - 1;
            return 1;
        }
    }
    r->err = "varint longer than 5 bytes";
    return 0;
}

static inline int rd_varlong(Rd *r, int64_t *out, const char *truncated) {
    if (r->p < r->end && *r->p < 0x80) {   /* the common one-byte varlong */
        uint64_t b = *r->p++;
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        return 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) { r->err = truncated; return 0; }
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            uint64_t z = (v >> 1) ^ (0 - (v & 1));
            *out = z <= INT64_MAX ? (int64_t)z : -(int64_t)(~z) - 1;
            return 1;
        }
    }
    r->err = "varlong longer than 10 bytes";
    return 0;
}

static const char TRUNC_FIELD[] = "record length too short for its fields (the record ends inside a field)";

/* a length-prefixed blob: -1 = null (*s NULL), < -1 invalid (bad names the field) */
static int rd_blob(Rd *r, const unsigned char **s, int32_t *n, const char *bad) {
    if (!rd_varint(r, n, TRUNC_FIELD)) return 0;
    if (*n < 0) {
        if (*n < -1) { r->err = bad; return 0; }
        *s = NULL;
        return 1;
    }
    if (r->end - r->p < *n) { r->err = TRUNC_FIELD; return 0; }
    *s = r->p;
    r->p += *n;
    return 1;
}

typedef struct {
    int64_t tsd;
    int32_t delta, klen, vlen, nh;             /* klen/vlen -1 = null */
    const unsigned char *key, *value, *hdrs;   /* hdrs: the first header */
    int64_t hk_bytes, hv_bytes;
    int32_t hv_nulls;
} Rec;

/* One record at r->p (r->end = end of the section); r->p moves past it. 0 with r->err set on a problem. */
static int parse_record(Rd *r, Rec *rec) {
    int32_t len;
    if (!rd_varint(r, &len, "records section ends inside a record length")) return 0;
    if (len < 0) { r->err = "negative record length"; return 0; }
    if (r->end - r->p < len) { r->err = "record length beyond the end of the records section (truncated record)"; return 0; }
    Rd b = {r->p, r->p + len, NULL};
    if (b.p >= b.end) { r->err = TRUNC_FIELD; return 0; }
    b.p++;   /* attributes: unused in v2 records */
    if (!rd_varlong(&b, &rec->tsd, TRUNC_FIELD) || !rd_varint(&b, &rec->delta, TRUNC_FIELD)
        || !rd_blob(&b, &rec->key, &rec->klen, "key length < -1")
        || !rd_blob(&b, &rec->value, &rec->vlen, "value length < -1")
        || !rd_varint(&b, &rec->nh, TRUNC_FIELD)) { r->err = b.err; return 0; }
    if (rec->nh < 0) { r->err = "negative header count"; return 0; }
    rec->hdrs = b.p;
    rec->hk_bytes = rec->hv_bytes = 0;
    rec->hv_nulls = 0;
    for (int32_t j = 0; j < rec->nh; j++) {
        int32_t kn, vn;
        const unsigned char *v;
        if (!rd_varint(&b, &kn, TRUNC_FIELD)) { r->err = b.err; return 0; }
        if (kn < 0) { r->err = "negative header key length"; return 0; }
        if (b.end - b.p < kn) { r->err = TRUNC_FIELD; return 0; }
        if (!utf8_valid(b.p, kn)) { r->err = "header key is not valid UTF-8"; return 0; }
        b.p += kn;
        rec->hk_bytes += kn;
        if (!rd_blob(&b, &v, &vn, "header value length < -1")) { r->err = b.err; return 0; }
        if (v == NULL) rec->hv_nulls++;
        else rec->hv_bytes += vn;
    }
    if (b.p != b.end) { r->err = "record length longer than its fields (bytes left inside the record)"; return 0; }
    r->p = b.end;
    return 1;
}

/* A varint already checked by parse_record (so: at most 5 bytes, in bounds). */
static inline int32_t checked_varint(const unsigned char **pp) {
    const unsigned char *p = *pp;
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        unsigned char b = *p++;
        v |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) break;
    }
    *pp = p;
    uint32_t z = (v >> 1) ^ (0u - (v & 1));
    return z <= INT32_MAX ? (int32_t)z : -(int32_t)(~z) - 1;
}

/* The next header of a record parse_record accepted, read from *pp (which moves past it). */
static inline void next_header(const unsigned char **pp, const unsigned char **k, int32_t *kn,
                               const unsigned char **v, int32_t *vn) {
    *kn = checked_varint(pp);
    *k = *pp;
    *pp += *kn;
    *vn = checked_varint(pp);
    *v = *vn >= 0 ? *pp : NULL;
    if (*vn > 0) *pp += *vn;
}

/* The walk every reader shares: checks the arguments, then calls back per record. */
typedef struct {
    const unsigned char *base;
    Py_ssize_t start, end, count;
    long long last_delta;
} Section;

static int section_args(Py_buffer *view, Section *s) {
    if (s->start < 0 || s->end > view->len || s->start > s->end) {
        PyErr_Format(PyExc_ValueError, "records range [%zd, %zd) outside a buffer of %zd bytes",
                     s->start, s->end, view->len);
        return -1;
    }
    if (s->count < 0) {
        PyErr_Format(PyExc_ValueError, "negative record count %zd", s->count);
        return -1;
    }
    if (s->count > (s->end - s->start) / 7) {   /* a record takes at least 7 bytes */
        PyErr_Format(PyExc_ValueError, "record count %zd larger than a records section of %zd bytes can hold",
                     s->count, s->end - s->start);
        return -1;
    }
    s->base = (const unsigned char *)view->buf;
    return 0;
}

/* Iterator state over the records of a section, with the count / delta / leftover checks. */
typedef struct {
    Section *s;
    Rd r;
    Py_ssize_t i;
    int64_t prev;
    const unsigned char *rec_start;
} Walk;

static void walk_init(Walk *w, Section *s) {
    w->s = s;
    w->r.p = s->base + s->start;
    w->r.end = s->base + s->end;
    w->r.err = NULL;
    w->i = 0;
    w->prev = -1;
}

static int walk_fail(Walk *w, const char *problem) {
    PyErr_Format(PyExc_ValueError, "record index %zd of %zd (byte %zd of the records section): %s",
                 w->i, w->s->count, (Py_ssize_t)(w->rec_start - (w->s->base + w->s->start)), problem);
    return -1;
}

/* 1: *rec holds record w->i (then w->i++); 0: all records read and nothing left over; -1: ValueError set. */
static int walk_next(Walk *w, Rec *rec) {
    w->rec_start = w->r.p;
    if (w->i == w->s->count) {
        if (w->r.p != w->r.end) {
            PyErr_Format(PyExc_ValueError, "%zd bytes left over after the %zd records the batch header counts",
                         (Py_ssize_t)(w->r.end - w->r.p), w->s->count);
            return -1;
        }
        return 0;
    }
    if (w->r.p == w->r.end) {
        PyErr_Format(PyExc_ValueError, "records section ends after %zd of the %zd records the batch header counts",
                     w->i, w->s->count);
        return -1;
    }
    if (!parse_record(&w->r, rec)) return walk_fail(w, w->r.err);
    if (rec->delta <= w->prev || rec->delta > w->s->last_delta) {
        char msg[160];
        PyOS_snprintf(msg, sizeof(msg), "offset delta %ld after %lld: deltas must increase and stay <= last_offset_delta %lld",
                      (long)rec->delta, (long long)w->prev, w->s->last_delta);
        return walk_fail(w, msg);
    }
    w->prev = rec->delta;
    w->i++;
    return 1;
}

/* Parse the optional fixed_tsd argument: 1 with *out set, 0 for None, -1 on error. */
static int fixed_tsd_arg(PyObject *o, int64_t *out) {
    if (o == NULL || o == Py_None) return 0;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "fixed_tsd must be an int or None, not %.80s", Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)v;
    return 1;
}

/* ------------------------------------------------------------------ Arrow buffers */

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

static inline void buf_put(Buf *b, const void *src, Py_ssize_t n) {   /* reserved beforehand */
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
}

/* A binary/string Arrow column: validity bitmap (kept only once a null shows up),
 * int32 offsets (count + 1 of them) and data. */
typedef struct { Buf valid, offsets, data; Py_ssize_t count, nulls; } BinCol;

static int bincol_init(BinCol *c) {
    if (buf_reserve(&c->offsets, 4) < 0) return -1;
    int32_t zero = 0;
    buf_put(&c->offsets, &zero, 4);
    return 0;
}

/* Room for `rows` more entries holding `bytes` of data, `nulls` of them null. */
static int bincol_reserve(BinCol *c, Py_ssize_t rows, int64_t bytes, Py_ssize_t nulls) {
    if (c->data.len + bytes > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "column data over 2 GiB: flush earlier");
        return -1;
    }
    if (buf_reserve(&c->offsets, 4 * rows) < 0 || buf_reserve(&c->data, (Py_ssize_t)bytes) < 0) return -1;
    if (c->nulls || nulls) {
        Py_ssize_t need = (c->count + rows + 7) / 8;
        if (buf_reserve(&c->valid, need - c->valid.len) < 0) return -1;
    }
    return 0;
}

static inline void bincol_add(BinCol *c, const unsigned char *s, Py_ssize_t n) {   /* s NULL: null */
    if (s == NULL && c->nulls == 0) {     /* first null: materialise the bitmap, all valid so far */
        Py_ssize_t full = c->count >> 3;
        memset(c->valid.data, 0xff, (size_t)full);
        if (c->count & 7) c->valid.data[full] = (char)((1 << (c->count & 7)) - 1);
        c->valid.len = (c->count + 7) / 8;
    }
    if (c->nulls || s == NULL) {
        if ((c->count & 7) == 0) c->valid.data[c->valid.len++] = 0;
        if (s != NULL) c->valid.data[c->count >> 3] |= (char)(1 << (c->count & 7));
        else c->nulls++;
    }
    if (s != NULL && n) buf_put(&c->data, s, n);
    int32_t off = (int32_t)c->data.len;
    buf_put(&c->offsets, &off, 4);
    c->count++;
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

static void ac_free(ArrowColumns *self) {
    PyMem_Free(self->deltas.data); PyMem_Free(self->tsds.data); PyMem_Free(self->hdr_offsets.data);
    memset(&self->deltas, 0, sizeof(Buf)); memset(&self->tsds, 0, sizeof(Buf));
    memset(&self->hdr_offsets, 0, sizeof(Buf));
    bincol_free(&self->keys); bincol_free(&self->values);
    bincol_free(&self->hkeys); bincol_free(&self->hvalues);
    self->rows = 0;
}

static int ac_reset(ArrowColumns *self) {
    ac_free(self);
    if (buf_reserve(&self->hdr_offsets, 4) < 0) return -1;
    int32_t zero = 0;
    buf_put(&self->hdr_offsets, &zero, 4);
    if (bincol_init(&self->keys) < 0 || bincol_init(&self->values) < 0
        || bincol_init(&self->hkeys) < 0 || bincol_init(&self->hvalues) < 0) return -1;
    return 0;
}

static int ac_init(ArrowColumns *self, PyObject *args, PyObject *kw) {
    if (!PyArg_ParseTuple(args, ":ArrowColumns")) return -1;
    return ac_reset(self);
}

static void ac_dealloc(ArrowColumns *self) {
    ac_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static char *reader_kwlist[] = {"buf", "start", "end", "record_count", "last_offset_delta", "fixed_tsd", NULL};

static PyObject *ac_add(ArrowColumns *self, PyObject *args, PyObject *kw) {
    Py_buffer view;
    Section s;
    PyObject *fixed_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nnnL|O:add", reader_kwlist, &view, &s.start, &s.end,
                                     &s.count, &s.last_delta, &fixed_obj)) return NULL;
    int64_t fixed = 0;
    int has_fixed = fixed_tsd_arg(fixed_obj, &fixed);
    if (has_fixed < 0 || section_args(&view, &s) < 0) { PyBuffer_Release(&view); return NULL; }

    /* pass 1: check everything and size every buffer; nothing is written */
    Walk w;
    Rec rec;
    int rc;
    int64_t kbytes = 0, vbytes = 0, nheaders = 0, hkbytes = 0, hvbytes = 0;
    Py_ssize_t knulls = 0, vnulls = 0, hvnulls = 0;
    walk_init(&w, &s);
    while ((rc = walk_next(&w, &rec)) == 1) {
        if (rec.key) kbytes += rec.klen; else knulls++;
        if (rec.value) vbytes += rec.vlen; else vnulls++;
        nheaders += rec.nh;
        hkbytes += rec.hk_bytes;
        hvbytes += rec.hv_bytes;
        hvnulls += rec.hv_nulls;
    }
    if (rc < 0) { PyBuffer_Release(&view); return NULL; }
    Py_ssize_t n = s.count;
    if (self->hkeys.count + nheaders > INT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_OverflowError, "over 2**31 headers: flush earlier");
        return NULL;
    }
    if (buf_reserve(&self->deltas, 8 * n) < 0 || buf_reserve(&self->tsds, 8 * n) < 0
        || buf_reserve(&self->hdr_offsets, 4 * n) < 0
        || bincol_reserve(&self->keys, n, kbytes, knulls) < 0
        || bincol_reserve(&self->values, n, vbytes, vnulls) < 0
        || bincol_reserve(&self->hkeys, (Py_ssize_t)nheaders, hkbytes, 0) < 0
        || bincol_reserve(&self->hvalues, (Py_ssize_t)nheaders, hvbytes, hvnulls) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }

    /* pass 2: write (cannot fail: checked and reserved above) */
    walk_init(&w, &s);
    while (walk_next(&w, &rec) == 1) {
        int64_t delta = rec.delta, tsd = has_fixed ? fixed : rec.tsd;
        buf_put(&self->deltas, &delta, 8);
        buf_put(&self->tsds, &tsd, 8);
        bincol_add(&self->keys, rec.key, rec.klen);
        bincol_add(&self->values, rec.value, rec.vlen);
        const unsigned char *hp = rec.hdrs;
        for (int32_t j = 0; j < rec.nh; j++) {
            const unsigned char *hk, *hv;
            int32_t hkn, hvn;
            next_header(&hp, &hk, &hkn, &hv, &hvn);
            bincol_add(&self->hkeys, hk, hkn);
            bincol_add(&self->hvalues, hv, hvn);
        }
        int32_t hoff = (int32_t)self->hkeys.count;
        buf_put(&self->hdr_offsets, &hoff, 4);
    }
    self->rows += n;
    PyBuffer_Release(&view);
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
    {"add", (PyCFunction)(void (*)(void))ac_add, METH_VARARGS | METH_KEYWORDS,
     "add(buf, start, end, record_count, last_offset_delta, fixed_tsd=None) -> records added; "
     "ValueError if malformed (nothing kept)"},
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

/* ------------------------------------------------------------------ decode_columns / scan_records */

static PyObject *blob_obj(const unsigned char *s, int32_t n) {
    if (s == NULL) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)s, n);
}

static PyObject *headers_obj(const Rec *rec, PyObject *empty) {
    if (rec->nh == 0) { Py_INCREF(empty); return empty; }
    PyObject *t = PyTuple_New(rec->nh);
    if (t == NULL) return NULL;
    const unsigned char *hp = rec->hdrs;
    for (int32_t j = 0; j < rec->nh; j++) {
        const unsigned char *hk, *hv;
        int32_t hkn, hvn;
        next_header(&hp, &hk, &hkn, &hv, &hvn);
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, j, pair);
        PyObject *k = PyUnicode_DecodeUTF8((const char *)hk, hkn, "strict");
        if (k == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(pair, 0, k);
        PyObject *v = blob_obj(hv, hvn);
        if (v == NULL) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(pair, 1, v);
    }
    return t;
}

static PyObject *decode_columns_impl(Section *s, int has_fixed, int64_t fixed) {
    Py_ssize_t n = s->count;
    PyObject *cols[5] = {NULL, NULL, NULL, NULL, NULL}, *empty = NULL, *fixed_obj = NULL, *res = NULL;
    for (int c = 0; c < 5; c++) if ((cols[c] = PyTuple_New(n)) == NULL) goto done;
    if ((empty = PyTuple_New(0)) == NULL) goto done;
    if (has_fixed && (fixed_obj = PyLong_FromLongLong(fixed)) == NULL) goto done;
    Walk w;
    Rec rec;
    int rc;
    walk_init(&w, s);
    while ((rc = walk_next(&w, &rec)) == 1) {
        Py_ssize_t i = w.i - 1;
        PyObject *o;
        if ((o = PyLong_FromLong(rec.delta)) == NULL) goto done;
        PyTuple_SET_ITEM(cols[0], i, o);
        if (has_fixed) { Py_INCREF(fixed_obj); o = fixed_obj; }
        else if ((o = PyLong_FromLongLong(rec.tsd)) == NULL) goto done;
        PyTuple_SET_ITEM(cols[1], i, o);
        if ((o = blob_obj(rec.key, rec.klen)) == NULL) goto done;
        PyTuple_SET_ITEM(cols[2], i, o);
        if ((o = blob_obj(rec.value, rec.vlen)) == NULL) goto done;
        PyTuple_SET_ITEM(cols[3], i, o);
        if ((o = headers_obj(&rec, empty)) == NULL) goto done;
        PyTuple_SET_ITEM(cols[4], i, o);
    }
    if (rc < 0) goto done;
    res = PyTuple_Pack(5, cols[0], cols[1], cols[2], cols[3], cols[4]);
done:
    for (int c = 0; c < 5; c++) Py_XDECREF(cols[c]);   /* a half-filled tuple holds NULLs: fine */
    Py_XDECREF(empty);
    Py_XDECREF(fixed_obj);
    return res;
}

static PyObject *decode_columns(PyObject *module, PyObject *args, PyObject *kw) {
    Py_buffer view;
    Section s;
    PyObject *fixed_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nnnL|O:decode_columns", reader_kwlist, &view, &s.start,
                                     &s.end, &s.count, &s.last_delta, &fixed_obj)) return NULL;
    int64_t fixed = 0;
    int has_fixed = fixed_tsd_arg(fixed_obj, &fixed);
    if (has_fixed < 0 || section_args(&view, &s) < 0) { PyBuffer_Release(&view); return NULL; }
    /* Every record allocates GC-tracked tuples only when it has headers, but each young-generation
     * collection would re-traverse the five growing column tuples: pause the cyclic GC (nothing
     * built here can form a cycle), as the pure-Python path does. */
#if PY_VERSION_HEX >= 0x030A0000
    int gc_was = PyGC_Disable();
#endif
    PyObject *res = decode_columns_impl(&s, has_fixed, fixed);
#if PY_VERSION_HEX >= 0x030A0000
    if (gc_was) PyGC_Enable();
#endif
    PyBuffer_Release(&view);
    return res;
}

/* The common case of scan_records in one tight loop: records without headers whose varints
 * are at most 2 bytes (10 for the timestamp delta). 1: done, results set; 0: something
 * unusual or wrong, the caller walks the section the careful way (which names any problem). */
static inline int fast_varint2(const unsigned char **pp, const unsigned char *end, int32_t *out) {
    const unsigned char *p = *pp;
    if (p < end && p[0] < 0x80) { uint32_t u = p[0]; *out = (int32_t)(u >> 1) ^ -(int32_t)(u & 1); *pp = p + 1; return 1; }
    if (end - p >= 2 && p[1] < 0x80) {
        uint32_t u = (uint32_t)(p[0] & 0x7f) | ((uint32_t)p[1] << 7);
        *out = (int32_t)(u >> 1) ^ -(int32_t)(u & 1); *pp = p + 2; return 1;
    }
    return 0;
}

static int scan_fast(const Section *s, int64_t *min_tsd, int64_t *max_tsd, Py_ssize_t *null_keys, int64_t *last) {
    const unsigned char *p = s->base + s->start, *end = s->base + s->end;
    int64_t lo = 0, hi = 0, prev = -1;
    Py_ssize_t nulls = 0;
    for (Py_ssize_t i = 0; i < s->count; i++) {
        int32_t len, delta, kn, vn;
        if (!fast_varint2(&p, end, &len) || len < 6 || end - p < len) return 0;
        const unsigned char *rend = p + len;
        p++;                                         /* attributes */
        Rd r = {p, rend, NULL};
        int64_t tsd;
        if (!rd_varlong(&r, &tsd, "")) return 0;
        p = r.p;
        if (!fast_varint2(&p, rend, &delta) || delta <= prev || delta > s->last_delta) return 0;
        if (!fast_varint2(&p, rend, &kn) || kn < -1 || rend - p < (kn > 0 ? kn : 0)) return 0;
        if (kn < 0) nulls++; else p += kn;
        if (!fast_varint2(&p, rend, &vn) || vn < -1 || rend - p < (vn > 0 ? vn : 0)) return 0;
        if (vn > 0) p += vn;
        if (rend - p != 1 || *p != 0) return 0;     /* a header, or bytes left inside the record */
        p = rend;
        if (i == 0 || tsd < lo) lo = tsd;
        if (i == 0 || tsd > hi) hi = tsd;
        prev = delta;
    }
    if (p != end) return 0;
    *min_tsd = lo; *max_tsd = hi; *null_keys = nulls; *last = prev;
    return 1;
}

static PyObject *scan_records(PyObject *module, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buf", "start", "end", "record_count", "last_offset_delta", NULL};
    Py_buffer view;
    Section s;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nnnL:scan_records", kwlist, &view, &s.start, &s.end,
                                     &s.count, &s.last_delta)) return NULL;
    if (section_args(&view, &s) < 0) { PyBuffer_Release(&view); return NULL; }
    Walk w;
    Rec rec;
    int rc;
    int64_t min_tsd = 0, max_tsd = 0, last = -1;
    Py_ssize_t null_keys = 0;
    if (scan_fast(&s, &min_tsd, &max_tsd, &null_keys, &last)) {
        PyBuffer_Release(&view);
        int contiguous = s.count == 0 || last == s.count - 1;
        return Py_BuildValue("(LLnO)", (long long)min_tsd, (long long)max_tsd, null_keys,
                             contiguous ? Py_True : Py_False);
    }
    walk_init(&w, &s);
    while ((rc = walk_next(&w, &rec)) == 1) {
        if (w.i == 1 || rec.tsd < min_tsd) min_tsd = rec.tsd;
        if (w.i == 1 || rec.tsd > max_tsd) max_tsd = rec.tsd;
        if (rec.key == NULL) null_keys++;
    }
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    /* strictly increasing from >= 0: exactly 0..n-1 iff the last one is n-1 */
    int contiguous = s.count == 0 || w.prev == s.count - 1;
    return Py_BuildValue("(LLnO)", (long long)min_tsd, (long long)max_tsd, null_keys,
                         contiguous ? Py_True : Py_False);
}

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"pack_records", pack_records, METH_VARARGS,
     "pack_records(records, with_deltas) -> (records_section, min_ts, max_ts) or None (see module doc)"},
    {"decode_columns", (PyCFunction)(void (*)(void))decode_columns, METH_VARARGS | METH_KEYWORDS,
     "decode_columns(buf, start, end, record_count, last_offset_delta, fixed_tsd=None) -> "
     "(offset_deltas, timestamp_deltas, keys, values, headers) tuples; ValueError if malformed"},
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_VARARGS | METH_KEYWORDS,
     "scan_records(buf, start, end, record_count, last_offset_delta) -> "
     "(min_tsd, max_tsd, null_key_count, contiguous); ValueError if malformed"},
    {NULL}
};

static struct PyModuleDef codec_module = {
    PyModuleDef_HEAD_INIT, "kafkasim.records._codec",
    "C fast path of kafkasim.records: the records section of a Kafka record batch v2 (see the source's header).",
    -1, module_methods,
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
