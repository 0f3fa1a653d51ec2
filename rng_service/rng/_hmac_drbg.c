/*
 * The arithmetic of HMAC_DRBG(SHA-256) (SP 800-90A rev1, 10.1.2) in C: rng_service/rng/drbg.py.
 *
 * Core(seed_material)           instantiate: Key = 0x00.., V = 0x01.., Update(seed_material)
 * core.update(data)             HMAC_DRBG_Update (10.1.2.2)
 * core.blocks(n, additional=b"") Generate's output loop: V = HMAC(Key, V) until n bytes are
 *                               out, then Update(additional); the caller runs the Update before
 *                               the output when there is additional input
 * core.wipe()                   zeroes the state
 * Cards(seed_material, decks)   a shoe shuffled by a DRBG of its own as it is read (below)
 *
 * drbg.py keeps every rule of the standard (input lengths, the reseed counter, additional input)
 * and its pure-Python core, which is the reference: the tests run the NIST CAVP vectors through
 * both cores and compare them on random inputs. This file holds the HMACs (2.7 us each through the
 * `cryptography` package, 0.1 us here) and the shoe read from them (Cards), whose Python glue cost
 * about as much as the hashing; shoe.py keeps the Python shoe as the reference. SHA-256 is OpenSSL's libcrypto, the same implementation `cryptography` and
 * Python's hashlib use; the HMAC (RFC 2104) is written out: a key's inner and outer pads are
 * hashed once, and each HMAC continues from copies of those two states.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* the SHA256_* calls: plain structs, copied by assignment */
#include <Python.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>

#define OUTLEN 32
#define BLOCK 64

typedef struct {
    SHA256_CTX inner; /* after the key XOR ipad block */
    SHA256_CTX outer; /* after the key XOR opad block */
} Keyed;

/* the working state (Key, V) */
typedef struct {
    Keyed key;
    unsigned char value[OUTLEN];
} State;

typedef struct {
    PyObject_HEAD
    State state;
} Core;

static void set_key(Keyed *k, const unsigned char key[OUTLEN]) {
    unsigned char ipad[BLOCK], opad[BLOCK];
    for (int t = 0; t < BLOCK; t++) {
        unsigned char b = t < OUTLEN ? key[t] : 0;
        ipad[t] = b ^ 0x36;
        opad[t] = b ^ 0x5c;
    }
    SHA256_Init(&k->inner);
    SHA256_Update(&k->inner, ipad, BLOCK);
    SHA256_Init(&k->outer);
    SHA256_Update(&k->outer, opad, BLOCK);
    OPENSSL_cleanse(ipad, BLOCK);
    OPENSSL_cleanse(opad, BLOCK);
}

/* out = HMAC(k, a || b || c); out may alias a */
static void hmac3(const Keyed *k, const unsigned char *a, size_t na, const unsigned char *b,
                  size_t nb, const unsigned char *c, size_t nc, unsigned char out[OUTLEN]) {
    unsigned char inner[OUTLEN];
    SHA256_CTX ctx = k->inner;
    SHA256_Update(&ctx, a, na);
    if (nb) SHA256_Update(&ctx, b, nb);
    if (nc) SHA256_Update(&ctx, c, nc);
    SHA256_Final(inner, &ctx);
    ctx = k->outer;
    SHA256_Update(&ctx, inner, OUTLEN);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(inner, OUTLEN);
}

/* HMAC_DRBG_Update (10.1.2.2) */
static void update(State *self, const unsigned char *data, size_t n) {
    static const unsigned char zero = 0x00, one = 0x01;
    unsigned char key[OUTLEN];
    hmac3(&self->key, self->value, OUTLEN, &zero, 1, data, n, key);
    set_key(&self->key, key);
    hmac3(&self->key, self->value, OUTLEN, NULL, 0, NULL, 0, self->value);
    if (n) {
        hmac3(&self->key, self->value, OUTLEN, &one, 1, data, n, key);
        set_key(&self->key, key);
        hmac3(&self->key, self->value, OUTLEN, NULL, 0, NULL, 0, self->value);
    }
    OPENSSL_cleanse(key, OUTLEN);
}

/* Instantiate's all-zero Key, its pads hashed once at import (set_key costs two compressions) */
static Keyed zero_keyed;

/* Instantiate's working state (10.1.2.3): Key = 0x00 00...00, V = 0x01 01...01, then Update */
static void instantiate(State *self, const unsigned char *material, size_t n) {
    self->key = zero_keyed;
    memset(self->value, 0x01, OUTLEN);
    update(self, material, n);
}

static void wipe(State *self) {
    OPENSSL_cleanse(&self->key, sizeof(self->key));
    OPENSSL_cleanse(self->value, OUTLEN);
}

static int Core_init(Core *self, PyObject *args, PyObject *kwds) {
    Py_buffer material;
    static char *kwlist[] = {"seed_material", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*", kwlist, &material)) return -1;
    instantiate(&self->state, (const unsigned char *)material.buf, (size_t)material.len);
    PyBuffer_Release(&material);
    return 0;
}

static PyObject *Core_update(Core *self, PyObject *arg) {
    Py_buffer data;
    if (!PyArg_Parse(arg, "y*", &data)) return NULL;
    update(&self->state, (const unsigned char *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

static PyObject *Core_blocks(Core *self, PyObject *args) {
    Py_ssize_t n;
    Py_buffer data = {0};
    if (!PyArg_ParseTuple(args, "n|y*", &n, &data)) return NULL;
    if (n < 0 || n > (1 << 16)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "blocks: 0 to 65536 bytes");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t done = 0; done < n; done += OUTLEN) {
        State *st = &self->state;
        hmac3(&st->key, st->value, OUTLEN, NULL, 0, NULL, 0, st->value);
        memcpy(dst + done, st->value, (size_t)(n - done < OUTLEN ? n - done : OUTLEN));
    }
    update(&self->state, (const unsigned char *)data.buf, data.buf ? (size_t)data.len : 0);
    PyBuffer_Release(&data);
    return out;
}

static PyObject *Core_wipe(Core *self, PyObject *Py_UNUSED(ignored)) {
    wipe(&self->state);
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *self) {
    wipe(&self->state);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Core_methods[] = {
    {"update", (PyCFunction)Core_update, METH_O, "HMAC_DRBG_Update with the given data."},
    {"blocks", (PyCFunction)Core_blocks, METH_VARARGS,
     "n bytes of V = HMAC(Key, V) output, then Update with the additional input (default none)."},
    {"wipe", (PyCFunction)Core_wipe, METH_NOARGS, "Zero the working state."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rng_service.rng._hmac_drbg.Core",
    .tp_doc = "HMAC_DRBG(SHA-256) working state (Key, V) and its two operations.",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

/*
 * Cards(seed_material, decks): the base of rng_service/rng/shoe.py's LazyShoe. The shoe of
 * `decks` ordered decks (game_math.cards.ordered_shoe) shuffled by the certified shuffle of
 * rng_service/rng/sampling.py over a DRBG instantiated on seed_material, only as far as it is
 * read: a read-only sequence (len, an index, a slice) whose reads run the forward Fisher-Yates
 * steps up to the last position read; `fixed` is how many leading positions are final.
 *
 * The steps draw from the DRBG's byte stream by sampling.py's convention: generate(128) requests,
 * no additional input, unread bytes carried over; a step of range r = size - i takes
 * m = ceil(k / 8) bytes big-endian (k = bit length of r - 1), keeps the low k bits, accepts a
 * value < r (j = i + value, swap i and j), else rejects it and draws again from the following
 * bytes. So the cards are those of HmacDrbg and DrbgRandom (the reference, shoe.py's
 * ReferenceLazyShoe, which the tests compare it with on random inputs and the self-test on the
 * known answers), at less cost, in ways that change no byte of the stream:
 *
 * - a request's four HMAC outputs are computed as the stream reaches them, and its closing Update
 *   only when a next request is needed: a round dealt from a 2-deck shoe reads about 15 bytes,
 *   one HMAC output of its first request, not four and the Update's three HMACs (instantiate's
 *   eight stay). Holding the state past the outputs it made gives nothing away that a shoe being
 *   dealt does not already hold (its seed, its unread bytes);
 * - the reads are C calls: a Python __getitem__ cost about 2 k instructions a card dealt.
 *
 * What drbg.py enforces beside the arithmetic holds by construction: one instantiate (shoe.py
 * checks its inputs), requests of 128 bytes with no additional input, a few dozen of them at most
 * (the reseed interval is 2**48). Once every position is final the DRBG state is wiped. The list
 * of cards is the object's own and never handed out (a slice is a new list), so it can hold no
 * reference cycle; it is still traversed for the collector, as a subclass may add members.
 */
#define REQUEST_OUTPUTS 4 /* sampling.BLOCK_BYTES (128) / OUTLEN */
#define MAX_DECKS 1260    /* 65,520 cards: every draw of one or two bytes; a shoe has 16 at most */

typedef struct {
    PyObject_HEAD
    State state;
    unsigned char unread[OUTLEN + 2]; /* the stream's unread bytes, from unread[0] */
    int have;                         /* how many */
    int outputs_left;                 /* outputs of the current request not yet computed */
    int update_due;                   /* the current request's closing Update not yet run */
    PyObject *cards;                  /* the list, its positions below `done` final */
    Py_ssize_t size;                  /* its length */
    Py_ssize_t done;                  /* steps run */
} Cards;

/* The stream's next OUTLEN bytes appended to the unread ones (at most one unread byte here). */
static void next_output(Cards *self) {
    State *st = &self->state;
    if (self->outputs_left == 0) { /* a new generate(128) request */
        if (self->update_due) update(st, NULL, 0); /* the previous request's closing Update */
        self->outputs_left = REQUEST_OUTPUTS;
        self->update_due = 0;
    }
    hmac3(&st->key, st->value, OUTLEN, NULL, 0, NULL, 0, st->value); /* V = HMAC(Key, V) */
    memcpy(self->unread + self->have, st->value, OUTLEN);
    self->have += OUTLEN;
    if (--self->outputs_left == 0) self->update_due = 1;
}

/* Run the steps until at least the first `count` positions are final. */
static void fix(Cards *self, Py_ssize_t count) {
    Py_ssize_t n = self->size, i = self->done;
    Py_ssize_t stop = count < n - 1 ? count : n - 1; /* a full shuffle has n - 1 steps */
    if (stop <= i) return;
    PyObject **cells = ((PyListObject *)self->cards)->ob_item;
    int pos = 0, have = self->have;
    while (i < stop) {
        unsigned range = (unsigned)(n - i), k = 0;
        for (unsigned x = range - 1; x; x >>= 1) k++;
        int m = k > 8 ? 2 : 1;
        if (have - pos < m) { /* keep the unread byte, if any, and draw the next output */
            memmove(self->unread, self->unread + pos, (size_t)(have - pos));
            self->have = have - pos;
            pos = 0;
            next_output(self);
            have = self->have;
        }
        unsigned value = self->unread[pos];
        if (m == 2) value = (value << 8) | self->unread[pos + 1];
        pos += m;
        value &= (1u << k) - 1;
        if (value < range) {
            Py_ssize_t j = i + (Py_ssize_t)value;
            /* a swap of two list cells moves references: no reference counts change */
            PyObject *tmp = cells[i];
            cells[i] = cells[j];
            cells[j] = tmp;
            i++;
        }
    }
    memmove(self->unread, self->unread + pos, (size_t)(have - pos));
    self->have = have - pos;
    self->done = i;
    if (i == n - 1) { /* every position final: the DRBG is no longer needed */
        wipe(&self->state);
        OPENSSL_cleanse(self->unread, sizeof(self->unread));
    }
}

static int Cards_init(Cards *self, PyObject *args, PyObject *kwds) {
    Py_buffer material;
    Py_ssize_t decks;
    static char *kwlist[] = {"seed_material", "decks", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*n", kwlist, &material, &decks)) return -1;
    if (decks < 1 || decks > MAX_DECKS) {
        PyBuffer_Release(&material);
        PyErr_SetString(PyExc_ValueError, "Cards: decks must be 1 to 1260");
        return -1;
    }
    PyObject *cards = PyList_New(52 * decks); /* ordered_shoe(decks) */
    if (cards == NULL) {
        PyBuffer_Release(&material);
        return -1;
    }
    for (Py_ssize_t c = 0; c < 52 * decks; c++) {
        PyObject *card = PyLong_FromSsize_t(c % 52);
        if (card == NULL) {
            Py_DECREF(cards);
            PyBuffer_Release(&material);
            return -1;
        }
        PyList_SET_ITEM(cards, c, card);
    }
    instantiate(&self->state, (const unsigned char *)material.buf, (size_t)material.len);
    PyBuffer_Release(&material);
    Py_XSETREF(self->cards, cards);
    self->have = 0;
    self->outputs_left = 0;
    self->update_due = 0;
    self->size = 52 * decks;
    self->done = 0;
    return 0;
}

static int ready(Cards *self) {
    if (self->cards == NULL) {
        PyErr_SetString(PyExc_ValueError, "Cards: not initialised");
        return 0;
    }
    return 1;
}

static Py_ssize_t Cards_length(Cards *self) {
    return ready(self) ? self->size : -1;
}

/* A key's conversion (its __index__, a slice's members') runs Python code, which may initialise
 * the shoe again (another list, another size): the size is read, and the list's cells, only
 * once the key is converted, and a slice's members are converted once. */
static PyObject *Cards_subscript(Cards *self, PyObject *key) {
    if (!ready(self)) return NULL;
    if (PyIndex_Check(key)) {
        Py_ssize_t index = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (index == -1 && PyErr_Occurred()) return NULL;
        if (!ready(self)) return NULL;
        Py_ssize_t n = self->size;
        if (index < 0) index += n;
        if (index < 0 || index >= n) {
            PyErr_Format(PyExc_IndexError, "position %zd is outside a %zd-card shoe", index, n);
            return NULL;
        }
        fix(self, index + 1);
        return Py_NewRef(PyList_GET_ITEM(self->cards, index));
    }
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0 || !ready(self)) return NULL;
        Py_ssize_t length = PySlice_AdjustIndices(self->size, &start, &stop, step);
        if (length > 0) {
            Py_ssize_t last = start + (length - 1) * step;
            fix(self, (start > last ? start : last) + 1);
        }
        PyObject *out = PyList_New(length); /* a new list */
        if (out == NULL) return NULL;
        PyObject **cells = ((PyListObject *)self->cards)->ob_item;
        for (Py_ssize_t i = 0; i < length; i++) { /* i * step stays within the shoe */
            PyList_SET_ITEM(out, i, Py_NewRef(cells[start + i * step]));
        }
        return out;
    }
    PyErr_Format(PyExc_TypeError, "shoe indices must be integers or slices, not %.200s",
                 Py_TYPE(key)->tp_name);
    return NULL;
}

static PyObject *Cards_get_fixed(Cards *self, void *Py_UNUSED(closure)) {
    if (!ready(self)) return NULL;
    return PyLong_FromSsize_t(self->done >= self->size - 1 ? self->size : self->done);
}

static int Cards_traverse(Cards *self, visitproc visit, void *arg) {
    Py_VISIT(self->cards);
    return 0;
}

static int Cards_clear(Cards *self) {
    Py_CLEAR(self->cards);
    return 0;
}

static void Cards_dealloc(Cards *self) {
    PyObject_GC_UnTrack(self);
    wipe(&self->state);
    OPENSSL_cleanse(self->unread, sizeof(self->unread));
    Py_CLEAR(self->cards);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMappingMethods Cards_mapping = {
    .mp_length = (lenfunc)Cards_length,
    .mp_subscript = (binaryfunc)Cards_subscript,
};

static PySequenceMethods Cards_sequence = {
    .sq_length = (lenfunc)Cards_length,
};

static PyGetSetDef Cards_getset[] = {
    {"fixed", (getter)Cards_get_fixed, NULL, "How many leading positions hold their final cards.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CardsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rng_service.rng._hmac_drbg.Cards",
    .tp_doc = "A shoe shuffled by the certified shuffle over an HMAC_DRBG of its own, as read.",
    .tp_basicsize = sizeof(Cards),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Cards_init,
    .tp_dealloc = (destructor)Cards_dealloc,
    .tp_traverse = (traverseproc)Cards_traverse,
    .tp_clear = (inquiry)Cards_clear,
    .tp_as_mapping = &Cards_mapping,
    .tp_as_sequence = &Cards_sequence,
    .tp_getset = Cards_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hmac_drbg", "HMAC_DRBG(SHA-256) arithmetic over libcrypto.", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__hmac_drbg(void) {
    static const unsigned char zero_key[OUTLEN] = {0};
    set_key(&zero_keyed, zero_key);
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&CardsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "Cards", (PyObject *)&CardsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
