/*
 * The dealer pass's arithmetic (game_math/analysis/ca_dealer.py), in C.
 *
 * block(levels, runs, child, factor, terminal, peeked, out_start, out_index, term_source,
 *       term_held, shoe, removed, out, cap, work) -> None
 *
 * Runs the backward pass of ``ca_dealer`` over one block of removal rows and writes each start's
 * outcome probabilities into ``out`` ((starts, 7, cap), rows 0 .. m - 1). The plan's arrays are
 * ``ca_dealer.KernelPlan``'s; ``work`` is scratch of ``KernelPlan.work_size(m)`` doubles.
 *
 * Why C: the pass is 1,156 draws x 5 outcomes per removal row for snap; in numpy every one of
 * them is a gather, a product and a sum over a temporary array, and the pass alone cost about as
 * much CPU as Farmer's whole C++ analysis. This is the same pass, element by element, with no
 * temporaries.
 *
 * Every floating-point operation is the one the numpy pass made before it (kept as the
 * reference in tests/game_math/test_dealer_pass.py, which checks the two bit for bit): the same
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

/* Scratch doubles for m rows: the source table, the terms, unseen, two inverses, one factor
 * row, and two levels. Mirrored by KernelPlan.work_size. */
static Py_ssize_t work_size(const Plan *p, Py_ssize_t m) {
    return (SOURCE_ROWS + p->n_terms + 4 + 2 * p->most_cells) * m;
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

/* new[h, c] += z[child, c] * (terms[t] * inv_child), c < 5: one draw of one hand */
static void add_draw(double *restrict dst, const double *restrict z, const double *restrict term,
                     const double *restrict inv_child, Py_ssize_t m) {
    double *restrict d1 = dst + m, *restrict d2 = dst + 2 * m, *restrict d3 = dst + 3 * m,
                     *restrict d4 = dst + 4 * m;
    const double *z1 = z + m, *z2 = z + 2 * m, *z3 = z + 3 * m, *z4 = z + 4 * m;
    for (Py_ssize_t r = 0; r < m; r++) {
        double f = term[r] * inv_child[r];
        dst[r] += z[r] * f;
        d1[r] += z1[r] * f;
        d2[r] += z2[r] * f;
        d3[r] += z3[r] * f;
        d4[r] += z4[r] * f;
    }
}

static void run_block(const Plan *p, const double *shoe, const int64_t *removed, Py_ssize_t m,
                      double *out, Py_ssize_t cap, double *work) {
    double *source = work;
    double *terms = source + SOURCE_ROWS * m;
    double *unseen = terms + p->n_terms * m;
    double *inv = unseen + m, *inv_child = inv + m, *spare = inv_child + m;
    double *bufs[2] = {spare + m, spare + m + p->most_cells * m};
    double shoe_sum = 0.0;

    for (int v = 0; v < NV; v++) shoe_sum += shoe[v]; /* whole counts: exact in any order */
    for (Py_ssize_t r = 0; r < m; r++) {
        int64_t seen = 0;
        for (int v = 0; v < NV; v++) {
            source[v * m + r] = shoe[v] - (double)removed[r * NV + v];
            seen += removed[r * NV + v];
        }
        unseen[r] = shoe_sum - (double)seen;
        /* suffix sums of n - r from value k up (whole numbers: exact) */
        source[(SUFFIX + NV - 1) * m + r] = source[(NV - 1) * m + r];
        for (int k = NV - 2; k >= 0; k--)
            source[(SUFFIX + k) * m + r] = source[(SUFFIX + k + 1) * m + r] + source[k * m + r];
        source[ZERO_ROW * m + r] = 0.0;
        inv_child[r] = 1.0;
    }
    for (Py_ssize_t t = 0; t < p->n_terms; t++) {
        const double *src = source + p->term_source[t] * m;
        double held = p->term_held[t];
        for (Py_ssize_t r = 0; r < m; r++) terms[t * m + r] = src[r] - held;
    }

    /* z: the previous (larger) level's values times (N - |r| - k), as in ca_dealer._block */
    const double *z = NULL;
    for (Py_ssize_t n = 0; n < p->n_levels; n++) {
        const int64_t *lv = p->levels + n * L_COLS;
        int64_t size = lv[L_SIZE], ncat = lv[L_NCAT], nruns = lv[L_NRUNS];
        const int64_t *runs = p->runs + lv[L_RUN0];
        const int64_t *terminal = p->terminal + lv[L_TERM0];
        double *new = bufs[n % 2];
        for (Py_ssize_t r = 0; r < m; r++) {
            double d = unseen[r] - (double)lv[L_CARDS];
            inv[r] = 1.0 / (d > 1.0 ? d : 1.0);
        }
        for (int64_t k = 0; k < size * ncat; k++)
            memcpy(new + k * m, terms + terminal[k] * m, (size_t)m * sizeof(double));
        /* hand h's j-th draw is entry h of run j; the runs are added in order, as numpy did */
        for (int64_t h = 0; h < size; h++) {
            int64_t at = lv[L_MOVE0];
            for (int64_t j = 0; j < nruns && h < runs[j]; at += runs[j], j++) {
                add_draw(new + h * ncat * m, z + p->child[at + h] * NDRAWN * m,
                         terms + p->factor[at + h] * m, inv_child, m);
            }
        }
        /* the starts read off this level: each outcome divided by N - |r| - k; busting is the
         * mass left (1, or P(no blackjack) after a peek) less the sum of the rest, summed
         * from 0.0 in column order as numpy's sum over the outcome axis does */
        for (int64_t i = lv[L_OUT0]; i < lv[L_OUT0] + lv[L_NOUT]; i++) {
            int64_t hand = p->out_index[i], u = p->out_start[i];
            int64_t peek = p->peeked[lv[L_HAND0] + hand];
            const double *vals = new + hand * ncat * m;
            double *dst = out + u * NCAT * cap;
            for (Py_ssize_t r = 0; r < m; r++) {
                double rest = 0.0;
                for (int64_t c = 0; c < ncat; c++) {
                    double x = vals[c * m + r] * inv[r];
                    rest += x;
                    if (c < NDRAWN || c == BLACKJACK) dst[c * cap + r] = x;
                }
                double mass = peek >= 0 ? 1.0 - source[peek * m + r] * inv[r] : 1.0;
                dst[BUST * cap + r] = mass - rest;
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
        run_block(&p, v[10].buf, v[11].buf, m, v[12].buf, cap, v[14].buf);
        Py_END_ALLOW_THREADS
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++)
        if (i != 13) PyBuffer_Release(&v[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"block", (PyCFunction)(void (*)(void))block, METH_FASTCALL,
     "The dealer pass over one block of removal rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dealer_pass", "The dealer pass's arithmetic.", -1, methods,
};

PyMODINIT_FUNC PyInit__dealer_pass(void) { return PyModule_Create(&module); }
