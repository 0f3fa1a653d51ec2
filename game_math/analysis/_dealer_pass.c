/*
 * The dealer pass's arithmetic (game_math/analysis/ca_dealer.py), in C.
 *
 * block(levels, runs, child, factor, terminal, peeked, out_start, out_index, term_source,
 *       term_held, shoe, removed, out, cap, work) -> None
 *
 * Runs the backward pass of ``ca_dealer`` over one block of removal rows and writes each start's
 * outcome probabilities into ``out`` ((cap, starts, 7), rows 0 .. m - 1: row-major, so that what
 * ``dealer_quantities`` gathers, a row's outcomes for every start, is one contiguous piece of
 * memory, and the gather a plain copy of rows). The plan's arrays are
 * ``ca_dealer.KernelPlan``'s; ``work`` is scratch of ``KernelPlan.work_size(m)`` doubles.
 *
 * Why C: the pass is 1,156 draws x 5 outcomes per removal row for snap; in numpy every one of
 * them is a gather, a product and a sum over a temporary array, and the pass alone cost about as
 * much CPU as Farmer's whole C++ analysis. This is the same pass, element by element, with no
 * temporaries.
 *
 * Every floating-point operation is the one the numpy pass made before it (kept as the
 * reference in tests/engine/test_dealer_pass.py, which checks the two bit for bit): the same
 * products, each rounded before it is added, sums in the same order, and the same divisions.
 * Everything here is element-wise over rows, so vectorising across rows changes no bit; the
 * build passes -ffp-contract=off so that no product and sum are fused into one rounding (FMA).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NV 10
#define NDRAWN 5
#define NCAT 7
#define BUST 5
#define BLACKJACK 6
#define SUFFIX NV
#define ZERO_ROW (2 * NV)
#define SOURCE_ROWS (ZERO_ROW + 1)

/* the columns of the plan's per-level table (KernelPlan.levels) */
enum { L_CARDS, L_SIZE, L_NCAT, L_NRUNS, L_RUN0, L_MOVE0, L_TERM0, L_HAND0, L_OUT0, L_NOUT,
       L_COLS };

typedef struct {
    const int64_t *levels, *runs, *child, *factor, *terminal, *peeked, *out_start, *out_index,
        *term_source;
    const double *term_held;
    Py_ssize_t n_levels, n_runs, n_moves, n_terminal, n_hands, n_out, n_terms;
    Py_ssize_t most_cells;
} Plan;

/* Rows are processed W at a time (GCC's vector extension: an SSE2 register on x86-64, NEON on
 * aarch64, plain doubles elsewhere; 4 rows, two registers on SSE2, measured slower); the scratch
 * arrays hold the block's rows padded to a multiple of W, the padding rows as if nothing were
 * removed. */
#define W 2
typedef double vec __attribute__((vector_size(W * sizeof(double))));

static inline vec load(const double *p) {
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(double *p, vec v) { memcpy(p, &v, sizeof v); }

static Py_ssize_t padded(Py_ssize_t m) { return (m + W - 1) / W * W; }

/* Scratch doubles for m rows: the source table, the terms and the terms scaled by the child
 * level's inverse, three row vectors, and two levels. Mirrored by DealerSolver.work_size. */
static Py_ssize_t work_size(const Plan *p, Py_ssize_t m) {
    return (SOURCE_ROWS + 2 * p->n_terms + 3 + 2 * p->most_cells) * padded(m);
}

static int in_range(int64_t x, Py_ssize_t lo, Py_ssize_t hi) { return x >= lo && x < hi; }

/* Every index of the plan lands inside its array, so that a wrong plan is an error, never a
 * stray read. Sets most_cells. */
static int check_plan(Plan *p, Py_ssize_t n_starts) {
    Py_ssize_t prev_size = 0, prev_ncat = 0;
    p->most_cells = 0;
    if (p->n_levels % L_COLS) return 0;
    p->n_levels /= L_COLS;
    for (Py_ssize_t t = 0; t < p->n_terms; t++)
        if (!in_range(p->term_source[t], 0, SOURCE_ROWS)) return 0;
    for (Py_ssize_t n = 0; n < p->n_levels; n++) {
        const int64_t *lv = p->levels + n * L_COLS;
        int64_t size = lv[L_SIZE], ncat = lv[L_NCAT], nruns = lv[L_NRUNS];
        if (size < 0 || (ncat != NDRAWN && ncat != NCAT) || nruns < 0 || lv[L_NOUT] < 0 ||
            lv[L_RUN0] < 0 || lv[L_RUN0] + nruns > p->n_runs ||
            lv[L_TERM0] < 0 || lv[L_TERM0] + size * ncat > p->n_terminal ||
            lv[L_HAND0] < 0 || lv[L_HAND0] + size > p->n_hands ||
            lv[L_OUT0] < 0 || lv[L_OUT0] + lv[L_NOUT] > p->n_out)
            return 0;
        if (nruns > NV) return 0; /* a hand draws at most one card of each value */
        if (nruns && prev_ncat != NDRAWN) return 0; /* draws read a level of 17 .. 21 only */
        int64_t moves = 0, last = size;
        for (int64_t j = 0; j < nruns; j++) {
            int64_t run = p->runs[lv[L_RUN0] + j];
            if (run < 0 || run > last) return 0; /* runs are prefixes, longest first */
            last = run;
            moves += run;
        }
        if (lv[L_MOVE0] < 0 || lv[L_MOVE0] + moves > p->n_moves) return 0;
        for (int64_t k = lv[L_MOVE0]; k < lv[L_MOVE0] + moves; k++)
            if (!in_range(p->child[k], 0, prev_size) || !in_range(p->factor[k], 0, p->n_terms))
                return 0;
        for (int64_t k = lv[L_TERM0]; k < lv[L_TERM0] + size * ncat; k++)
            if (!in_range(p->terminal[k], 0, p->n_terms)) return 0;
        for (int64_t k = lv[L_HAND0]; k < lv[L_HAND0] + size; k++)
            if (!in_range(p->peeked[k], -1, NV)) return 0;
        for (int64_t k = lv[L_OUT0]; k < lv[L_OUT0] + lv[L_NOUT]; k++)
            if (!in_range(p->out_start[k], 0, n_starts) || !in_range(p->out_index[k], 0, size))
                return 0;
        if (size * ncat > p->most_cells) p->most_cells = size * ncat;
        prev_size = size;
        prev_ncat = ncat;
    }
    return 1;
}

/* One hand's row of a level: new[c] = terms[terminal[c]] + sum over its draws j, in order,
 * of z[child_j, c] * scaled[factor_j] (c < 5), each product rounded before it is added, as the
 * numpy pass's ``new[:run] += draws`` did run by run. The sums stay in registers across the
 * draws, W rows at a time. */
static void hand_row(double *restrict new, const double *restrict terms, const int64_t *terminal,
                     int64_t ncat, const double *const *zs, const double *const *fs, int nm,
                     Py_ssize_t s) {
    const double *t0 = terms + terminal[0] * s, *t1 = terms + terminal[1] * s,
                 *t2 = terms + terminal[2] * s, *t3 = terms + terminal[3] * s,
                 *t4 = terms + terminal[4] * s;
    for (Py_ssize_t r = 0; r < s; r += W) {
        vec a0 = load(t0 + r), a1 = load(t1 + r), a2 = load(t2 + r), a3 = load(t3 + r),
            a4 = load(t4 + r);
        for (int k = 0; k < nm; k++) {
            const double *z = zs[k] + r;
            vec f = load(fs[k] + r);
            a0 += load(z) * f;
            a1 += load(z + s) * f;
            a2 += load(z + 2 * s) * f;
            a3 += load(z + 3 * s) * f;
            a4 += load(z + 4 * s) * f;
        }
        store(new + r, a0);
        store(new + s + r, a1);
        store(new + 2 * s + r, a2);
        store(new + 3 * s + r, a3);
        store(new + 4 * s + r, a4);
    }
    for (int64_t c = NDRAWN; c < ncat; c++) /* blackjack and bust: no draw reaches them */
        memcpy(new + c * s, terms + terminal[c] * s, (size_t)s * sizeof(double));
}

static void run_block(const Plan *p, const double *shoe, const int64_t *removed, Py_ssize_t m,
                      double *out, Py_ssize_t n_starts, double *work) {
    Py_ssize_t s = padded(m); /* the stride of every scratch row */
    double *source = work;
    double *terms = source + SOURCE_ROWS * s;
    double *scaled = terms + p->n_terms * s;
    double *unseen = scaled + p->n_terms * s;
    double *inv = unseen + s, *inv_child = inv + s;
    double *bufs[2] = {inv_child + s, inv_child + s + p->most_cells * s};
    double shoe_sum = 0.0;

    for (int v = 0; v < NV; v++) shoe_sum += shoe[v]; /* whole counts: exact in any order */
    for (Py_ssize_t r = 0; r < s; r++) {
        int64_t seen = 0;
        for (int v = 0; v < NV; v++) {
            int64_t x = r < m ? removed[r * NV + v] : 0;
            source[v * s + r] = shoe[v] - (double)x;
            seen += x;
        }
        unseen[r] = shoe_sum - (double)seen;
        /* suffix sums of n - r from value k up (whole numbers: exact) */
        source[(SUFFIX + NV - 1) * s + r] = source[(NV - 1) * s + r];
        for (int k = NV - 2; k >= 0; k--)
            source[(SUFFIX + k) * s + r] = source[(SUFFIX + k + 1) * s + r] + source[k * s + r];
        source[ZERO_ROW * s + r] = 0.0;
        inv_child[r] = 1.0;
    }
    for (Py_ssize_t t = 0; t < p->n_terms; t++) {
        const double *src = source + p->term_source[t] * s;
        double held = p->term_held[t];
        for (Py_ssize_t r = 0; r < s; r++) terms[t * s + r] = src[r] - held;
    }

    /* z: the previous (larger) level's values times (N - |r| - k), as in the numpy pass: the
     * division is folded into the next level's draw factors (scaled) */
    const double *z = NULL;
    for (Py_ssize_t n = 0; n < p->n_levels; n++) {
        const int64_t *lv = p->levels + n * L_COLS;
        int64_t size = lv[L_SIZE], ncat = lv[L_NCAT], nruns = lv[L_NRUNS];
        const int64_t *runs = p->runs + lv[L_RUN0];
        const int64_t *terminal = p->terminal + lv[L_TERM0];
        double *new = bufs[n % 2];
        for (Py_ssize_t r = 0; r < s; r++) {
            double d = unseen[r] - (double)lv[L_CARDS];
            inv[r] = 1.0 / (d > 1.0 ? d : 1.0);
        }
        if (nruns)
            for (Py_ssize_t t = 0; t < p->n_terms; t++)
                for (Py_ssize_t r = 0; r < s; r++)
                    scaled[t * s + r] = terms[t * s + r] * inv_child[r];
        /* hand h's j-th draw is entry h of run j */
        for (int64_t h = 0; h < size; h++) {
            const double *zs[NV], *fs[NV];
            int nm = 0;
            int64_t at = lv[L_MOVE0];
            for (int64_t j = 0; j < nruns && h < runs[j]; at += runs[j], j++) {
                zs[nm] = z + p->child[at + h] * NDRAWN * s;
                fs[nm++] = scaled + p->factor[at + h] * s;
            }
            hand_row(new + h * ncat * s, terms, terminal + h * ncat, ncat, zs, fs, nm, s);
        }
        /* the starts read off this level: each outcome divided by N - |r| - k; busting is the
         * mass left (1, or P(no blackjack) after a peek) less the sum of the rest, summed
         * from 0.0 in column order as numpy's sum over the outcome axis does */
        for (int64_t i = lv[L_OUT0]; i < lv[L_OUT0] + lv[L_NOUT]; i++) {
            int64_t hand = p->out_index[i], u = p->out_start[i];
            int64_t peek = p->peeked[lv[L_HAND0] + hand];
            const double *vals = new + hand * ncat * s;
            double *dst = out + u * NCAT;
            Py_ssize_t stride = n_starts * NCAT; /* one row of out: every start's outcomes */
            for (Py_ssize_t r = 0; r < m; r++) {
                double rest = 0.0;
                for (int64_t c = 0; c < ncat; c++) {
                    double x = vals[c * s + r] * inv[r];
                    rest += x;
                    if (c < NDRAWN || c == BLACKJACK) dst[r * stride + c] = x;
                }
                double mass = peek >= 0 ? 1.0 - source[peek * s + r] * inv[r] : 1.0;
                dst[r * stride + BUST] = mass - rest;
            }
        }
        z = new;
        double *swap = inv_child;
        inv_child = inv;
        inv = swap;
    }
}

/* a C-contiguous buffer of 8-byte items of kind 'd' (double) or 'i' (int64) */
static int get(PyObject *obj, char kind, int writable, Py_buffer *view, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return 0;
    const char *f = view->format ? view->format : "B";
    while (*f == '@' || *f == '=' || *f == '<') f++;
    int ok = view->itemsize == 8 &&
             (kind == 'd' ? strcmp(f, "d") == 0 : (strcmp(f, "l") == 0 || strcmp(f, "q") == 0));
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "block: %s must be a contiguous array of %s", name,
                     kind == 'd' ? "float64" : "int64");
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

#define NARGS 15
static const char *const NAMES[NARGS] = {
    "levels", "runs", "child", "factor", "terminal", "peeked", "out_start", "out_index",
    "term_source", "term_held", "shoe", "removed", "out", "cap", "work"};

static PyObject *block(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char KINDS[] = "iiiiiiiiiddid d"; /* per argument; ' ' for cap */
    Py_buffer v[NARGS];
    int got = 0;
    PyObject *result = NULL;
    if (nargs != NARGS) {
        PyErr_Format(PyExc_TypeError, "block takes %d arguments (%zd given)", NARGS, nargs);
        return NULL;
    }
    Py_ssize_t cap = PyLong_AsSsize_t(args[13]);
    if (cap == -1 && PyErr_Occurred()) return NULL;
    for (; got < NARGS; got++) {
        if (got == 13) {
            v[got].obj = NULL;
            continue;
        }
        if (!get(args[got], KINDS[got], got == 12 || got == 14, &v[got], NAMES[got])) goto done;
    }
#define LEN(i) (v[i].len / 8)
    Plan p = {
        v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf, v[6].buf, v[7].buf,
        v[8].buf, v[9].buf, LEN(0), LEN(1), LEN(2), LEN(4), LEN(5), LEN(6), LEN(8), 0,
    };
    Py_ssize_t m = LEN(11) / NV;
    Py_ssize_t n_starts = cap > 0 ? LEN(12) / (NCAT * cap) : 0;
    if (LEN(3) != p.n_moves || LEN(7) != p.n_out || LEN(9) != p.n_terms || LEN(10) != NV ||
        LEN(11) != m * NV || cap < m || LEN(12) != n_starts * NCAT * cap ||
        !check_plan(&p, n_starts)) {
        PyErr_SetString(PyExc_ValueError, "block: the plan's indices or the arrays' sizes do "
                                          "not fit together");
        goto done;
    }
    if (LEN(14) < work_size(&p, m)) {
        PyErr_SetString(PyExc_ValueError, "block: work is smaller than work_size(rows)");
        goto done;
    }
    if (m > 0) {
        Py_BEGIN_ALLOW_THREADS
        run_block(&p, v[10].buf, v[11].buf, m, v[12].buf, n_starts, v[14].buf);
        Py_END_ALLOW_THREADS
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++)
        if (i != 13) PyBuffer_Release(&v[i]);
    return result;
}

/* quantities(values, rows, weights, out) -> None
 *
 * out[i, u] = sum over the seven outcomes c of weights[i, c] * values[rows[i], u, c]: the
 * quantities ``dealer_quantities`` keeps of a block (values (m, starts, 7) as ``block`` wrote
 * them). Why C: in numpy this was a gather and an einsum per block whose inner loop runs seven
 * products per output, about as long as the call's own overhead, 5-6 ms of a cold snap analysis.
 *
 * The sums are einsum's, bit for bit (tests/engine/test_dealer_pass.py keeps the einsum as the
 * reference): for "nc,ncu->nu" with each row's seven outcomes adjacent, numpy's contiguous
 * sum of products runs two lanes, even outcomes in one and odd ones in the other, each from 0.0,
 * the odd lane's last step adding the product of the zero padding, then lane 0 + lane 1, added to
 * the zeroed output. The weights are stand payoffs (-1, 0, 1) and one-hots, so every product is
 * exact and a fused multiply-add would change nothing; the order of the sums is what fixes the
 * bits, and -ffp-contract=off keeps it. */
static PyObject *quantities(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer v[4];
    int got = 0;
    PyObject *result = NULL;
    static const char *const QNAMES[4] = {"values", "rows", "weights", "out"};
    static const char QKINDS[] = "didd";
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "quantities takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    for (; got < 4; got++)
        if (!get(args[got], QKINDS[got], got == 3, &v[got], QNAMES[got])) goto done;
    Py_ssize_t n = v[1].len / 8;
    Py_ssize_t n_starts = n > 0 ? v[3].len / 8 / n : 0;
    Py_ssize_t m = n_starts > 0 ? v[0].len / 8 / (n_starts * NCAT) : 0;
    if (v[2].len / 8 != n * NCAT || v[3].len / 8 != n * n_starts ||
        (n > 0 && v[0].len / 8 != m * n_starts * NCAT)) {
        PyErr_SetString(PyExc_ValueError, "quantities: the arrays' sizes do not fit together");
        goto done;
    }
    const double *values = v[0].buf, *weights = v[2].buf;
    const int64_t *rows = v[1].buf;
    double *out = v[3].buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!in_range(rows[i], 0, m)) {
            PyErr_SetString(PyExc_ValueError, "quantities: a row outside the block");
            goto done;
        }
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *w = weights + i * NCAT;
        for (Py_ssize_t u = 0; u < n_starts; u++) {
            const double *x = values + (rows[i] * n_starts + u) * NCAT;
            double even = 0.0, odd = 0.0;
            even += w[0] * x[0];
            odd += w[1] * x[1];
            even += w[2] * x[2];
            odd += w[3] * x[3];
            even += w[4] * x[4];
            odd += w[5] * x[5];
            even += w[6] * x[6];
            odd += 0.0 * 0.0;
            out[i * n_starts + u] = 0.0 + (even + odd);
        }
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"block", (PyCFunction)(void (*)(void))block, METH_FASTCALL,
     "The dealer pass over one block of removal rows."},
    {"quantities", (PyCFunction)(void (*)(void))quantities, METH_FASTCALL,
     "The weighted sums of a block's outcomes that the analysis keeps."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dealer_pass", "The dealer pass's arithmetic.", -1, methods,
};

PyMODINIT_FUNC PyInit__dealer_pass(void) { return PyModule_Create(&module); }
