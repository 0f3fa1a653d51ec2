/* A regular file read whole in one call (rng_service/audit/files.py, `read_file`).
 *
 * The audit reads every file it is given (two a snap round: its record and its shoe's reveal)
 * by opening it without blocking or following a link, asking its type and size of the open
 * descriptor, reading it and closing it: in Python four calls into `os`, a stat result of
 * twenty members made and the parts joined, about 24,000 instructions a file. This makes the
 * same system calls, with the same flags, in one call:
 *
 *   read_regular(path, follow, limit) -> bytes | (mode, size)
 *
 * The bytes of the file if it is regular and holds at most `limit` bytes; else the mode and the
 * size `fstat` gave (size -1: the file grew past `limit` while read), from which the caller says
 * why, as it always has. An open, fstat or read that fails raises OSError from errno, as `os`
 * does (the caller words it from `strerror`). A read interrupted by a signal runs the signal's
 * handler (the audit's per-file time bound raises there) and, if that returns, reads on, as
 * `os.read` does (PEP 475); the descriptor is closed on every way out.
 *
 * files.py keeps the Python reading as the reference and for a build without this;
 * tests/audit/test_audit_read_regular.py holds the two alike on every kind of file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* the least bytes asked of the OS per read (files.py's _READ_CHUNK) */
#define READ_CHUNK 4096

static PyObject *closed_with_error(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *py_read_regular(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_regular(path, follow, limit) takes three arguments");
        return NULL;
    }
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(args[0], &encoded)) {
        return NULL;
    }
    int follow = PyObject_IsTrue(args[1]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (follow < 0 || (limit == -1 && PyErr_Occurred())) {
        Py_DECREF(encoded);
        return NULL;
    }
    if (limit < 0 || limit >= PY_SSIZE_T_MAX - READ_CHUNK) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_ValueError, "read_regular: limit out of range");
        return NULL;
    }
    int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
    int fd;
    do {
        Py_BEGIN_ALLOW_THREADS
        fd = open(PyBytes_AS_STRING(encoded), flags);
        Py_END_ALLOW_THREADS
    } while (fd < 0 && errno == EINTR && PyErr_CheckSignals() == 0);
    Py_DECREF(encoded);
    if (fd < 0) {
        return PyErr_Occurred() ? NULL : PyErr_SetFromErrno(PyExc_OSError);
    }
    struct stat info;
    if (fstat(fd, &info) != 0) {
        return closed_with_error(fd);
    }
    if (!S_ISREG(info.st_mode) || info.st_size > limit) {
        close(fd);
        return Py_BuildValue("(iL)", (int)info.st_mode, (long long)info.st_size);
    }
    /* to the end of the file, or one byte past the limit (a file that grew since fstat) */
    Py_ssize_t size = (Py_ssize_t)info.st_size;
    Py_ssize_t room = size + 1 < READ_CHUNK ? READ_CHUNK : size + 1;
    if (room > limit + 1) {
        room = limit + 1;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, room);
    if (data == NULL) {
        close(fd);
        return NULL;
    }
    Py_ssize_t total = 0;
    while (total <= limit) {
        if (total == room) { /* grown since fstat: room for more, up to a byte past the limit */
            room = room * 2 > limit + 1 ? limit + 1 : room * 2;
            if (_PyBytes_Resize(&data, room) < 0) {
                close(fd);
                return NULL;
            }
        }
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = read(fd, PyBytes_AS_STRING(data) + total, (size_t)(room - total));
        Py_END_ALLOW_THREADS
        if (got < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) { /* the handler raised: the time bound */
                    close(fd);
                    Py_DECREF(data);
                    return NULL;
                }
                continue;
            }
            Py_DECREF(data);
            return closed_with_error(fd);
        }
        if (got == 0) {
            break;
        }
        total += got;
    }
    close(fd);
    if (total > limit) {
        Py_DECREF(data);
        return Py_BuildValue("(iL)", (int)info.st_mode, -1LL);
    }
    if (total != room && _PyBytes_Resize(&data, total) < 0) {
        return NULL;
    }
    return data;
}

static PyMethodDef methods[] = {
    {"read_regular", (PyCFunction)(void (*)(void))py_read_regular, METH_FASTCALL,
     "read_regular(path, follow, limit) -> the bytes of a regular file of at most limit bytes, "
     "else (mode, size) (size -1: grew past limit); OSError as os raises it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_read_regular",
    "A regular file read whole in one call (see rng_service/audit/files.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__read_regular(void)
{
    return PyModule_Create(&module);
}
