/*
 * The passes over the player's hand trees (game_math/analysis/ca_eval.py, ca_core.tree_arrays),
 * in C.
 *
 * odds(n_u, removed, child, first_bust, bj_card, one_count, p_live, bust_value) -> None
 *     each hand's draw odds and the value of its busting draws (``ca_core.tree_arrays``)
 * draw(sel, child, p_live, bust_value, values, out) -> None
 *     the value of drawing one card to each selected hand (``ca_eval.draw_value``)
 * optimal(bounds, child, p_live, bust_value, stand, total, multi, hit) -> None
 *     the composition-dependent hit/stand pass (``ca_eval.optimal_values``)
 * fixed(bounds, child, p_live, bust_value, stand, total, hit_dec, multi) -> None
 *     a fixed strategy's hit/stand pass (``ca_eval.fixed_values``)
 * outcome(bounds, parent, p_live, ncards, total, hit_dec, dbl_dec, first, stand, bust) -> None
 *     where a fixed strategy's hands end (``ca_eval.outcome_weights``)
 * weights(n_u, counts, fact, out) -> None
 *     the odds of each hand as the player's first cards, per start (``ca_core.hand_weights``)
 * classes(stand, bust, v_stand, bust_value, dealer, tie_at, n_u, removed, bj_card, sums) -> None
 *     the four sums over a tree's hands behind its outcome classes
 *     (``ca_game.GameModel._outcome_classes``)
 *
 * Arrays are C-contiguous, hand-major: (Hm, U) per hand and start, (Hm, 10, U) for the draw
 * odds, (Hm, 10) per hand and card value; ``bounds`` (L, 2) holds each level's [start, stop), in
 * the trees' order (most cards first).
 *
 * Why C: a tree's hands are a few thousand, its starts 10 (55 in double exposure), and numpy
 * made every level of every pass a dozen calls over small arrays: the passes cost about half of
 * Farmer's whole C++ analysis in call overhead and temporaries. Here each is one call.
 *
 * Every floating-point operation is the one the numpy code made (kept as the reference in
 * tests/engine/test_tree_pass.py, which checks the two bit for bit): each draw's sum over the
 * ten card values starts at 0.0 and adds the products in value order, as numpy's einsum does;
 * a sum over a hand's ten values that numpy made with ``.sum`` follows numpy's pairwise
 * summation (eight partial sums, then the rest in order); ``np.maximum(a, b)`` is ``a`` only
 * when a > b (or a is NaN), so ties of signed zeros come out as numpy's; a boolean mask
 * multiplies as 1.0 or 0.0, as numpy's did, so zeros keep numpy's signs. Everything is
 * element-wise over starts, so vectorising changes no bit; the build passes -ffp-contract=off
 * so that no product and sum are fused into one rounding (FMA).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NV 10

/* np.maximum's choice: the first operand only when it is larger (or NaN) */
static inline double npmax(double a, double b) { return (a > b || a != a) ? a : b; }

/* numpy's pairwise sum of ten contiguous doubles (``DOUBLE_pairwise_sum``, n = 10), added to
 * the reduction's initial 0.0 */
static inline double sum10(const double *a) {
    double res = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    res += a[8];
    res += a[9];
    return 0.0 + res;
}

/* ----- argument handling ---------------------------------------------------------------- */

/* a C-contiguous buffer of kind 'd' (float64), 'i' (int64) or 'b' (bool) */
static int get(PyObject *obj, char kind, int writable, Py_buffer *view, const char *fn,
               const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return 0;
    const char *f = view->format ? view->format : "B";
    while (*f == '@' || *f == '=' || *f == '<') f++;
    int ok;
    if (kind == 'd')
        ok = view->itemsize == 8 && strcmp(f, "d") == 0;
    else if (kind == 'i')
        ok = view->itemsize == 8 && (strcmp(f, "l") == 0 || strcmp(f, "q") == 0);
    else
        ok = view->itemsize == 1 && strcmp(f, "?") == 0;
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a contiguous %sarray of %s", fn, name,
                     writable ? "writable " : "",
                     kind == 'd' ? "float64" : kind == 'i' ? "int64" : "bool");
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

#define MAXARGS 10
typedef struct {
    Py_buffer v[MAXARGS];
    int got;
} Args;

/* kinds: one letter per argument, upper case when written; '#' an integer (into *number) */
static int parse(Args *a, const char *fn, const char *kinds, const char *const *names,
                 PyObject *const *args, Py_ssize_t nargs, Py_ssize_t *number) {
    Py_ssize_t n = (Py_ssize_t)strlen(kinds);
    a->got = 0;
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, n, nargs);
        return 0;
    }
    for (; a->got < n; a->got++) {
        char k = kinds[a->got];
        if (k == '#') {
            a->v[a->got].obj = NULL;
            *number = PyLong_AsSsize_t(args[a->got]);
            if (*number == -1 && PyErr_Occurred()) return 0;
            continue;
        }
        int w = k >= 'A' && k <= 'Z';
        if (!get(args[a->got], w ? (char)(k - 'A' + 'a') : k, w, &a->v[a->got], fn,
                 names[a->got]))
            return 0;
    }
    return 1;
}

static void release(Args *a) {
    for (int i = 0; i < a->got; i++)
        if (a->v[i].obj) PyBuffer_Release(&a->v[i]);
}

#define LEN(i) (a.v[i].len / a.v[i].itemsize)
#define BUF(i) (a.v[i].buf)

static PyObject *bad(const char *fn) {
    PyErr_Format(PyExc_ValueError, "%s: the arrays' sizes or indices do not fit together", fn);
    return NULL;
}

/* every index of ``idx`` (n of them) in [lo, hi) */
static int all_in(const int64_t *idx, Py_ssize_t n, int64_t lo, int64_t hi) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (idx[i] < lo || idx[i] >= hi) return 0;
    return 1;
}

/* levels: 0 <= start <= stop <= m, each */
static int levels_ok(const int64_t *bounds, Py_ssize_t len, Py_ssize_t m) {
    if (len % 2) return 0;
    for (Py_ssize_t l = 0; l < len; l += 2)
        if (bounds[l] < 0 || bounds[l] > bounds[l + 1] || bounds[l + 1] > m) return 0;
    return 1;
}

/* ----- the arithmetic --------------------------------------------------------------------- */

/* out[u] = (sum over v, from 0.0, of p[v, u] * values[max(kid[v], 0), u]) + bust[u], the sum
 * in value order as numpy's einsum("nvu,nvu->nu") makes it */
static inline void draw_one(double *restrict out, const double *restrict p, const int64_t *kid,
                            const double *restrict values, const double *restrict bust,
                            Py_ssize_t nu) {
    for (Py_ssize_t u = 0; u < nu; u++) out[u] = 0.0;
    for (int v = 0; v < NV; v++) {
        const double *row = values + (kid[v] > 0 ? kid[v] : 0) * nu;
        const double *pv = p + v * nu;
        for (Py_ssize_t u = 0; u < nu; u++) out[u] += pv[u] * row[u];
    }
    for (Py_ssize_t u = 0; u < nu; u++) out[u] += bust[u];
}

static void run_odds(const double *n_u, const int64_t *removed, const int64_t *child,
                     const int64_t *first_bust, const int64_t *bj_card, int one_count,
                     Py_ssize_t m, Py_ssize_t nu, double *p_live, double *bust_value,
                     double *scratch) {
    double *nsum = scratch, *suffix = nsum + nu, *left = suffix + nu * (NV + 1),
           *inv = left + nu;
    for (Py_ssize_t u = 0; u < nu; u++) {
        const double *n = n_u + u * NV;
        double s = 0.0; /* whole counts: exact in any order */
        for (int v = 0; v < NV; v++) s += n[v];
        nsum[u] = s;
        double *suf = suffix + u * (NV + 1);
        suf[NV] = 0.0;
        for (int v = NV - 1; v >= 0; v--) suf[v] = suf[v + 1] + n[v];
    }
    for (Py_ssize_t h = 0; h < m; h++) {
        const int64_t *r = removed + h * NV;
        const int64_t *kid = child + h * NV;
        int64_t rsum = 0, fb = first_bust[h], rsuf = 0;
        for (int v = 0; v < NV; v++) rsum += r[v];
        for (int v = (int)fb; v < NV; v++) rsuf += r[v];
        for (Py_ssize_t u = 0; u < nu; u++) {
            left[u] = nsum[u] - (double)rsum;
            inv[u] = 1.0 / npmax(left[u], 1.0);
        }
        double *p = p_live + h * NV * nu;
        for (int v = 0; v < NV; v++) {
            int busts = kid[v] < 0;
            double rv = (double)r[v];
            double *pv = p + v * nu;
            if (one_count) {
                /* (n - removed) * (~busts * inv[:, :1]) */
                double f = (double)!busts * inv[0];
                for (Py_ssize_t u = 0; u < nu; u++) pv[u] = (n_u[u * NV + v] - rv) * f;
            } else {
                for (Py_ssize_t u = 0; u < nu; u++)
                    pv[u] = busts ? 0.0 : (n_u[u * NV + v] - rv) * inv[u];
            }
        }
        double *bv = bust_value + h * nu;
        for (Py_ssize_t u = 0; u < nu; u++) {
            double count = suffix[u * (NV + 1) + fb] - (double)rsuf;
            bv[u] = -npmax(count, 0.0) * inv[u];
            int64_t b = bj_card[u];
            if (b < 0) continue;
            /* a peeked start: after a busting card, the dealer's blackjack card is one of
             * left - 1 cards (``_peeked_bust``) */
            const double *n = n_u + u * NV;
            double avail[NV], terms[NV];
            for (int v = 0; v < NV; v++) avail[v] = npmax(n[v] - (double)r[v], 0.0);
            double den = npmax(left[u] - 1.0, 1.0), inv2 = 1.0 / npmax(left[u], 1.0);
            for (int v = 0; v < NV; v++) {
                double bj = avail[b] - (double)(v == b);
                double no_bj = 1.0 - npmax(bj, 0.0) / den;
                double p_bust = avail[v] * (double)(kid[v] < 0) * inv2;
                terms[v] = p_bust * no_bj;
            }
            bv[u] = -sum10(terms);
        }
    }
}

static void run_optimal(const int64_t *bounds, Py_ssize_t nlev, const int64_t *child,
                        const double *p_live, const double *bust_value, const double *stand,
                        const int64_t *total, Py_ssize_t m, Py_ssize_t nu, double *multi,
                        double *hit) {
    memset(multi, 0, (size_t)(m * nu) * sizeof(double));
    memset(hit, 0, (size_t)(m * nu) * sizeof(double));
    for (Py_ssize_t l = 0; l < nlev; l++) {
        int64_t lo = bounds[2 * l], hi = bounds[2 * l + 1];
        /* the whole level's draws first: they read multi as it was before the level */
        for (int64_t n = lo; n < hi; n++)
            draw_one(hit + n * nu, p_live + n * NV * nu, child + n * NV, multi,
                     bust_value + n * nu, nu);
        for (int64_t n = lo; n < hi; n++) {
            const double *s = stand + n * nu, *h = hit + n * nu;
            double *out = multi + n * nu;
            if (total[n] >= 21)
                memcpy(out, s, (size_t)nu * sizeof(double));
            else
                for (Py_ssize_t u = 0; u < nu; u++) out[u] = npmax(s[u], h[u]);
        }
    }
}

/* a fixed strategy: each hand hits where hit_dec says and its total is below 21, else stands;
 * ``h`` is scratch for one level */
static void run_fixed(const int64_t *bounds, Py_ssize_t nlev, const int64_t *child,
                      const double *p_live, const double *bust_value, const double *stand,
                      const int64_t *total, const unsigned char *hit_dec, Py_ssize_t m,
                      Py_ssize_t nu, double *multi, double *h) {
    memset(multi, 0, (size_t)(m * nu) * sizeof(double));
    for (Py_ssize_t l = 0; l < nlev; l++) {
        int64_t lo = bounds[2 * l], hi = bounds[2 * l + 1];
        for (int64_t n = lo; n < hi; n++)
            draw_one(h + (n - lo) * nu, p_live + n * NV * nu, child + n * NV, multi,
                     bust_value + n * nu, nu);
        for (int64_t n = lo; n < hi; n++) {
            const double *s = stand + n * nu, *hn = h + (n - lo) * nu;
            const unsigned char *dec = hit_dec + n * nu;
            double *out = multi + n * nu;
            int low = total[n] < 21;
            for (Py_ssize_t u = 0; u < nu; u++) out[u] = (dec[u] && low) ? hn[u] : s[u];
        }
    }
}

/* the adjoint of run_fixed, from the first hands' weights (``outcome_weights``); scratch holds
 * held (m rows), the drawing weights hits and doubled (m + 1 rows each: row m is the zero
 * row a hand's missing parents point to) and two rows of sums */
static void run_outcome(const int64_t *bounds, Py_ssize_t nlev, const int64_t *parent,
                        const double *p_live, const int64_t *ncards, const int64_t *total,
                        const unsigned char *hit_dec, const unsigned char *dbl_dec,
                        const double *first, Py_ssize_t m, Py_ssize_t nu, double *stand,
                        double *bust, double *scratch) {
    double *held = scratch, *hits = held + m * nu, *doubled = hits + (m + 1) * nu,
           *sh = doubled + (m + 1) * nu, *sd = sh + nu;
    memset(hits, 0, (size_t)((m + 1) * nu) * sizeof(double));
    for (Py_ssize_t i = 0; i < m * nu; i++) {
        held[i] = first[i] * (double)!dbl_dec[i];
        doubled[i] = first[i] * (double)dbl_dec[i];
        stand[i] = 0.0;
        bust[i] = doubled[i];
    }
    for (Py_ssize_t u = 0; u < nu; u++) doubled[m * nu + u] = 0.0;
    for (Py_ssize_t l = nlev - 1; l >= 0; l--) { /* fewest cards first */
        int64_t lo = bounds[2 * l], hi = bounds[2 * l + 1];
        if (lo == hi) continue;
        int three = ncards[lo] == 3; /* a double's one card */
        for (int64_t n = lo; n < hi; n++) {
            for (Py_ssize_t u = 0; u < nu; u++) sh[u] = sd[u] = 0.0;
            for (int v = 0; v < NV; v++) {
                int64_t par = parent[n * NV + v];
                if (par < 0) par = m;
                /* odds of drawing v to the parent (the zero row's odds are the last hand's) */
                const double *odds = p_live + ((par < m - 1 ? par : m - 1) * NV + v) * nu;
                const double *hp = hits + par * nu, *dp = doubled + par * nu;
                for (Py_ssize_t u = 0; u < nu; u++) sh[u] += hp[u] * odds[u];
                if (three)
                    for (Py_ssize_t u = 0; u < nu; u++) sd[u] += dp[u] * odds[u];
            }
            double *hd = held + n * nu, *st = stand + n * nu, *bu = bust + n * nu,
                   *hn = hits + n * nu;
            const unsigned char *dec = hit_dec + n * nu;
            int low = total[n] < 21;
            for (Py_ssize_t u = 0; u < nu; u++) {
                hd[u] += sh[u];
                if (three) st[u] += sd[u];
                hn[u] = hd[u] * (double)(dec[u] && low);
                bu[u] += hn[u];
                st[u] += hd[u] - hn[u];
            }
        }
    }
}

/* ----- the functions ---------------------------------------------------------------------- */

static PyObject *odds(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"n_u", "removed", "child", "first_bust", "bj_card",
                                        "one_count", "p_live", "bust_value"};
    Args a;
    Py_ssize_t one_count = 0;
    PyObject *result = NULL;
    double *scratch = NULL;
    if (!parse(&a, "odds", "diiii#DD", names, args, nargs, &one_count)) goto done;
    Py_ssize_t nu = LEN(0) / NV, m = LEN(1) / NV;
    if (LEN(0) != nu * NV || LEN(1) != m * NV || LEN(2) != m * NV || LEN(3) != m ||
        LEN(4) != nu || LEN(6) != m * NV * nu || LEN(7) != m * nu || nu == 0 ||
        !all_in(BUF(2), m * NV, -1, m) || !all_in(BUF(3), m, 0, NV + 1) ||
        !all_in(BUF(4), nu, -1, NV)) {
        bad("odds");
        goto done;
    }
    scratch = malloc((size_t)(nu * (NV + 4)) * sizeof(double));
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_odds(BUF(0), BUF(1), BUF(2), BUF(3), BUF(4), one_count != 0, m, nu, BUF(6), BUF(7),
             scratch);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(scratch);
    release(&a);
    return result;
}

static PyObject *draw(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"sel", "child", "p_live", "bust_value", "values",
                                        "out"};
    Args a;
    PyObject *result = NULL;
    if (!parse(&a, "draw", "iidddD", names, args, nargs, NULL)) goto done;
    Py_ssize_t k = LEN(0), m = LEN(1) / NV, nu = m ? LEN(3) / m : 0;
    if (LEN(1) != m * NV || LEN(3) != m * nu || LEN(2) != m * NV * nu || LEN(4) != m * nu ||
        LEN(5) != k * nu || !all_in(BUF(0), k, 0, m) || !all_in(BUF(1), m * NV, -1, m)) {
        bad("draw");
        goto done;
    }
    const int64_t *sel = BUF(0), *child = BUF(1);
    const double *p_live = BUF(2), *bust = BUF(3), *values = BUF(4);
    double *out = BUF(5);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++) {
        int64_t n = sel[i];
        draw_one(out + i * nu, p_live + n * NV * nu, child + n * NV, values, bust + n * nu, nu);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&a);
    return result;
}

static PyObject *optimal(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"bounds", "child", "p_live", "bust_value", "stand",
                                        "total", "multi", "hit"};
    Args a;
    PyObject *result = NULL;
    if (!parse(&a, "optimal", "iidddiDD", names, args, nargs, NULL)) goto done;
    Py_ssize_t m = LEN(5), nu = m ? LEN(3) / m : 0;
    if (LEN(1) != m * NV || LEN(3) != m * nu || LEN(2) != m * NV * nu || LEN(4) != m * nu ||
        LEN(6) != m * nu || LEN(7) != m * nu || !levels_ok(BUF(0), LEN(0), m) ||
        !all_in(BUF(1), m * NV, -1, m)) {
        bad("optimal");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_optimal(BUF(0), LEN(0) / 2, BUF(1), BUF(2), BUF(3), BUF(4), BUF(5), m, nu, BUF(6),
                BUF(7));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&a);
    return result;
}

static PyObject *fixed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"bounds", "child", "p_live", "bust_value", "stand",
                                        "total", "hit_dec", "multi"};
    Args a;
    PyObject *result = NULL;
    double *h = NULL;
    if (!parse(&a, "fixed", "iidddibD", names, args, nargs, NULL)) goto done;
    Py_ssize_t m = LEN(5), nu = m ? LEN(3) / m : 0;
    if (LEN(1) != m * NV || LEN(3) != m * nu || LEN(2) != m * NV * nu || LEN(4) != m * nu ||
        LEN(6) != m * nu || LEN(7) != m * nu || !levels_ok(BUF(0), LEN(0), m) ||
        !all_in(BUF(1), m * NV, -1, m)) {
        bad("fixed");
        goto done;
    }
    h = malloc((size_t)(m * nu + 1) * sizeof(double));
    if (!h) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_fixed(BUF(0), LEN(0) / 2, BUF(1), BUF(2), BUF(3), BUF(4), BUF(5), BUF(6), m, nu,
              BUF(7), h);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(h);
    release(&a);
    return result;
}

static PyObject *outcome(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"bounds", "parent", "p_live", "ncards", "total",
                                        "hit_dec", "dbl_dec", "first", "stand", "bust"};
    Args a;
    PyObject *result = NULL;
    double *scratch = NULL;
    if (!parse(&a, "outcome", "iidiibbdDD", names, args, nargs, NULL)) goto done;
    Py_ssize_t m = LEN(4), nu = m ? LEN(7) / m : 0;
    if (LEN(1) != m * NV || LEN(2) != m * NV * nu || LEN(3) != m || LEN(5) != m * nu ||
        LEN(6) != m * nu || LEN(7) != m * nu || LEN(8) != m * nu || LEN(9) != m * nu ||
        !levels_ok(BUF(0), LEN(0), m) || !all_in(BUF(1), m * NV, -1, m)) {
        bad("outcome");
        goto done;
    }
    scratch = malloc((size_t)((3 * m + 4) * nu + 1) * sizeof(double));
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_outcome(BUF(0), LEN(0) / 2, BUF(1), BUF(2), BUF(3), BUF(4), BUF(5), BUF(6), BUF(7), m,
                nu, BUF(8), BUF(9), scratch);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(scratch);
    release(&a);
    return result;
}

/* sums[0..3][u]: over the hands h, in order, of stand * mass, stand * v_stand, stand * tie and
 * bust * bust_value, where mass is P(no dealer blackjack | start u, hand h) after a peek (1.0
 * otherwise: bj_card[u] < 0) as ``ca_core.no_blackjack`` computes it, and tie is
 * dealer[tie_at[h], u] (0.0 where tie_at[h] < 0). Why C: in numpy each tree's four sums took
 * four products over (hands, starts) temporaries, a zeroed tie array filled by a gather and a
 * (starts, hands) table of no-blackjack odds, about 3-4 ms of a cold snap analysis over its 11
 * trees. The same doubles: numpy's sum over axis 0 of a C-contiguous (hands, starts) array
 * adds the hands' rows in order to 0.0 (so -0.0 terms alone sum to 0.0); the odds' counts are whole
 * numbers (exact in any order) and their one division and subtraction are numpy's. */
static void run_classes(const double *stand, const double *bust, const double *v_stand,
                        const double *bust_value, const double *dealer, const int64_t *tie_at,
                        const double *n_u, const int64_t *removed, const int64_t *bj_card,
                        Py_ssize_t m, Py_ssize_t nu, double *sums) {
    double *held = sums, *net = sums + nu, *tied = sums + 2 * nu, *busted = sums + 3 * nu;
    for (Py_ssize_t u = 0; u < nu; u++) held[u] = net[u] = tied[u] = busted[u] = 0.0;
    for (Py_ssize_t h = 0; h < m; h++) {
        const int64_t *r = removed + h * NV;
        int64_t seen = 0;
        for (int v = 0; v < NV; v++) seen += r[v];
        const double *row = tie_at[h] >= 0 ? dealer + tie_at[h] * nu : NULL;
        for (Py_ssize_t u = 0; u < nu; u++) {
            Py_ssize_t i = h * nu + u;
            double mass = 1.0;
            if (bj_card[u] >= 0) {
                double nsum = 0.0;
                for (int v = 0; v < NV; v++) nsum += n_u[u * NV + v]; /* whole numbers */
                double left = nsum - (double)seen;
                mass = 1.0 - npmax(n_u[u * NV + bj_card[u]] - (double)r[bj_card[u]], 0.0) / left;
            }
            double x_held = stand[i] * mass, x_net = stand[i] * v_stand[i],
                   x_tied = stand[i] * (row ? row[u] : 0.0), x_bust = bust[i] * bust_value[i];
            held[u] += x_held;
            net[u] += x_net;
            tied[u] += x_tied;
            busted[u] += x_bust;
        }
    }
}

static PyObject *classes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"stand", "bust", "v_stand", "bust_value", "dealer",
                                        "tie_at", "n_u", "removed", "bj_card", "sums"};
    Args a;
    PyObject *result = NULL;
    if (!parse(&a, "classes", "dddddidiiD", names, args, nargs, NULL)) goto done;
    Py_ssize_t m = LEN(5), nu = LEN(8), q = nu ? LEN(4) / nu : 0;
    if (LEN(0) != m * nu || LEN(1) != m * nu || LEN(2) != m * nu || LEN(3) != m * nu ||
        LEN(4) != q * nu || LEN(6) != nu * NV || LEN(7) != m * NV || LEN(9) != 4 * nu ||
        !all_in(BUF(5), m, -1, q) || !all_in(BUF(8), nu, -1, NV)) {
        bad("classes");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_classes(BUF(0), BUF(1), BUF(2), BUF(3), BUF(4), BUF(5), BUF(6), BUF(7), BUF(8), m, nu,
                BUF(9));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&a);
    return result;
}

/* out[u, h] = num * multinom / den for the hand counts[h] against the unseen counts n_u[u]:
 * num the product over values v, in order from 1.0, of the falling factorials
 * n (n - 1) .. (n - c + 1) (each built up from 1.0, a factor max(n - k, 0) at a time), multinom
 * fact[cards] divided by fact[c] value by value, den the product from 1.0 of total - j for
 * j < cards. Why C: numpy made it as (starts, hands) temporaries, a dozen of them per value,
 * about 2 ms of a cold snap analysis for one table. The operations are numpy's, in numpy's
 * order (its where(cards > j, total - j, 1) multiplies by exactly 1.0 past a hand's cards,
 * which changes nothing); every factor is a whole number. */
static void run_weights(const int64_t *n_u, const int64_t *counts, const double *fact,
                        Py_ssize_t nu, Py_ssize_t m, int64_t kmax, double *ff, double *out) {
    for (Py_ssize_t u = 0; u < nu; u++)
        for (int v = 0; v < NV; v++) {
            double *f = ff + (u * NV + v) * kmax;
            f[0] = 1.0;
            for (int64_t k = 1; k < kmax; k++) {
                int64_t left = n_u[u * NV + v] - (k - 1);
                f[k] = f[k - 1] * (double)(left > 0 ? left : 0);
            }
        }
    for (Py_ssize_t h = 0; h < m; h++) {
        const int64_t *c = counts + h * NV;
        int64_t cards = 0;
        for (int v = 0; v < NV; v++) cards += c[v];
        double multinom = fact[cards];
        for (int v = 0; v < NV; v++) multinom /= fact[c[v]];
        for (Py_ssize_t u = 0; u < nu; u++) {
            const double *f = ff + u * NV * kmax;
            int64_t total = 0;
            for (int v = 0; v < NV; v++) total += n_u[u * NV + v];
            double num = 1.0, den = 1.0;
            for (int v = 0; v < NV; v++) num *= f[v * kmax + c[v]];
            for (int64_t j = 0; j < cards; j++) den *= (double)(total - j);
            out[u * m + h] = num * multinom / den;
        }
    }
}

static PyObject *weights(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const names[] = {"n_u", "counts", "fact", "out"};
    Args a;
    PyObject *result = NULL;
    double *ff = NULL;
    if (!parse(&a, "weights", "iidD", names, args, nargs, NULL)) goto done;
    Py_ssize_t nu = LEN(0) / NV, m = LEN(1) / NV;
    const int64_t *counts = BUF(1);
    int64_t kmax = 1, most = 0;
    int ok = LEN(0) == nu * NV && LEN(1) == m * NV && LEN(3) == nu * m;
    for (Py_ssize_t h = 0; ok && h < m; h++) {
        int64_t cards = 0;
        for (int v = 0; v < NV; v++) {
            int64_t x = counts[h * NV + v];
            if (x < 0) ok = 0;
            if (x + 1 > kmax) kmax = x + 1;
            cards += x;
        }
        if (cards > most) most = cards;
    }
    if (!ok || most >= LEN(2)) {
        bad("weights");
        goto done;
    }
    ff = malloc((size_t)(nu * NV * kmax + 1) * sizeof(double));
    if (!ff) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_weights(BUF(0), counts, BUF(2), nu, m, kmax, ff, BUF(3));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(ff);
    release(&a);
    return result;
}

static PyMethodDef methods[] = {
    {"odds", (PyCFunction)(void (*)(void))odds, METH_FASTCALL,
     "Each hand's draw odds and the value of its busting draws."},
    {"draw", (PyCFunction)(void (*)(void))draw, METH_FASTCALL,
     "The value of drawing one card to each selected hand."},
    {"optimal", (PyCFunction)(void (*)(void))optimal, METH_FASTCALL,
     "The composition-dependent hit/stand pass over a tree."},
    {"fixed", (PyCFunction)(void (*)(void))fixed, METH_FASTCALL,
     "A fixed strategy's hit/stand pass over a tree."},
    {"outcome", (PyCFunction)(void (*)(void))outcome, METH_FASTCALL,
     "Where a fixed strategy's hands stand and draw, from the first hands' weights."},
    {"weights", (PyCFunction)(void (*)(void))weights, METH_FASTCALL,
     "The odds of each hand as the player's first cards, per start."},
    {"classes", (PyCFunction)(void (*)(void))classes, METH_FASTCALL,
     "The sums over a tree's hands behind its outcome classes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tree_pass", "The passes over the player's hand trees.", -1, methods,
};

PyMODINIT_FUNC PyInit__tree_pass(void) { return PyModule_Create(&module); }
