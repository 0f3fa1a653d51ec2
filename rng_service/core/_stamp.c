/* The stored timestamps' text in C (rng_service/core/times.py, `utc_stamp` and `utc_now`).
 *
 * stamp(ns) is `datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%S")` + "." + the six
 * digits of the microseconds + "Z", for `ns` nanoseconds since the epoch (floored to the
 * microsecond, as the Python reference floors them); now() is stamp(time.time_ns()), the clock
 * read as `time.time_ns` reads it on Linux (clock_gettime, CLOCK_REALTIME). Every write
 * transaction stamps its rows several times (six a round transition), and the Python form cost
 * about 6,000 instructions a stamp (a bignum division, a divmod, a formatted field); this is a
 * few hundred. tests/core/test_times.py holds it to the Python reference (hypothesis).
 *
 * An `ns` past 64 bits raises OverflowError (times.utc_stamp then asks the reference); every
 * time within them lies in years 1677 to 2262, written with four digits as the reference writes
 * them (years 1 to 999 it writes with fewer: never reached here).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

/* seconds from 0001-01-01T00:00:00 to the epoch, and to 10000-01-01T00:00:00 */
#define FIRST_SECOND (-62135596800LL)
#define END_SECOND (253402300800LL)

/* The civil date of `days` since 1970-01-01 (proleptic Gregorian; H. Hinnant's
 * civil_from_days), for days within years 1 to 9999. */
static void civil(long long days, long long *year, int *month, int *day)
{
    days += 719468;
    long long era = (days >= 0 ? days : days - 146096) / 146097;
    long long doe = days - era * 146097;                                  /* [0, 146096] */
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);              /* [0, 365] */
    long long mp = (5 * doy + 2) / 153;                                   /* [0, 11] */
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (*month <= 2);
}

static void digits(char *out, long long value, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + value % 10);
        value /= 10;
    }
}

/* The stamp of `micros` microseconds since the epoch, or NULL with ValueError outside years 1 to
 * 9999 (not reached from 64 bits of nanoseconds). */
static PyObject *stamp_of(long long micros)
{
    long long seconds = micros / 1000000, frac = micros % 1000000;
    if (frac < 0) { /* floored, as Python's divmod */
        frac += 1000000;
        seconds -= 1;
    }
    if (seconds < FIRST_SECOND || seconds >= END_SECOND) {
        PyErr_SetString(PyExc_ValueError, "timestamp out of range: years 1 to 9999 only");
        return NULL;
    }
    long long days = seconds / 86400, in_day = seconds % 86400;
    if (in_day < 0) {
        in_day += 86400;
        days -= 1;
    }
    long long year;
    int month, day;
    civil(days, &year, &month, &day);
    /* YYYY-MM-DDTHH:MM:SS.ffffffZ: 27 characters */
    char text[27];
    digits(text, year, 4);
    text[4] = '-';
    digits(text + 5, month, 2);
    text[7] = '-';
    digits(text + 8, day, 2);
    text[10] = 'T';
    digits(text + 11, in_day / 3600, 2);
    text[13] = ':';
    digits(text + 14, in_day / 60 % 60, 2);
    text[16] = ':';
    digits(text + 17, in_day % 60, 2);
    text[19] = '.';
    digits(text + 20, frac, 6);
    text[26] = 'Z';
    return PyUnicode_FromStringAndSize(text, sizeof text);
}

static PyObject *stamp(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "an int of nanoseconds, not %.80s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    int overflow = 0;
    long long ns = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (ns == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow != 0) {
        PyErr_SetString(PyExc_OverflowError, "nanoseconds past 64 bits");
        return NULL;
    }
    /* floored to the microsecond, as ``ns // 1000`` */
    long long micros = ns / 1000;
    if (ns % 1000 < 0) {
        micros -= 1;
    }
    return stamp_of(micros);
}

static PyObject *now(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    /* tv_nsec is in [0, 1e9): the microseconds floor as ns // 1000 does */
    return stamp_of((long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

static PyMethodDef methods[] = {
    {"stamp", stamp, METH_O,
     "stamp(ns, /)\n--\n\nThe stored form of ns nanoseconds since the epoch."},
    {"now", now, METH_NOARGS, "now()\n--\n\nThe stored form of the time now."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stamp", "The stored timestamps' text in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__stamp(void)
{
    return PyModule_Create(&module);
}
