/* The C interface to CPython's frame internals: the only code in Ember that sees
 * `_PyInterpreterFrame` fields or other Py_BUILD_CORE declarations.
 *
 * One plain-C file per supported minor version (shim_311.c, shim_312.c, shim_313.c) implements
 * it; each compiles to nothing unless the interpreter being built against matches, so exactly one
 * definition of every function is linked. C, not C++, because the internal headers use C11
 * atomics and C99 designated initializers that g++ rejects (notes/pep523.md, section 1).
 *
 * Every function expects the GIL to be held. Frames are those passed to a PEP 523 eval-frame hook,
 * before the default evaluator has seen them.
 */
#ifndef EMBER_FRONTEND_CPYTHON_SHIM_H
#define EMBER_FRONTEND_CPYTHON_SHIM_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
/* A new minor version changes the frame layout or its ownership rules: add shim_3XX.c after
 * re-auditing the internals this interface touches, then widen this range. */
#error "Ember's frame shim supports CPython 3.11, 3.12 and 3.13 only"
#endif
#ifdef Py_GIL_DISABLED
/* The hook and the code caches rely on the GIL to serialize every access. */
#error "Ember does not support free-threaded CPython builds"
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct _PyInterpreterFrame;

/* Borrowed pointers into a frame. */
typedef struct EmberFrameFields {
  PyCodeObject* code; /* NULL when the frame does not run a code object (3.13 shim frames) */
  PyObject* func;
  PyObject* globals;
  PyObject* builtins;
  PyObject* const* localsplus;
  int nlocalsplus;
} EmberFrameFields;

void ember_shim_read_frame(struct _PyInterpreterFrame* frame, EmberFrameFields* out);

/* Whether the frame has executed any instruction (a resumed generator, or a frame re-entered
 * with throwflag). Only a frame that has not started can be replaced. */
int ember_shim_frame_started(struct _PyInterpreterFrame* frame);

/* Whether a PyFrameObject already refers to the frame. Clearing such a frame would require
 * handing its data to the frame object, which Ember never does: it evaluates it normally. */
int ember_shim_frame_has_frame_object(struct _PyInterpreterFrame* frame);

/* Whether the thread's data stack owns the frame (rather than a generator or a frame object). */
int ember_shim_frame_owned_by_thread(struct _PyInterpreterFrame* frame);

/* Whether the frame is the first one of its data-stack chunk, i.e. removing it also releases
 * the chunk. Diagnostics for the tests that cross chunk boundaries. */
int ember_shim_frame_starts_chunk(PyThreadState* tstate, struct _PyInterpreterFrame* frame);

/* Number of data-stack chunks the thread currently uses (diagnostics). */
int ember_shim_datastack_chunk_count(PyThreadState* tstate);

/* Releases a frame that the hook answered without evaluating it. 3.11: nothing, the caller clears
 * and pops it. 3.12 and later: the callee owns the frame, so this clears its references and pops
 * it off the thread's data stack. Precondition: owned by the thread, no frame object, and it is
 * the top frame of the data stack (nothing pushed since the hook received it is still there). */
void ember_shim_dispose_unrun_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame);

/* Whether the code is a generator, coroutine or async generator body (or marked as an iterable
 * coroutine): its frames are owned by a generator object once they start. The flags are public
 * and identical on every supported version. */
static inline int ember_shim_code_is_generator(PyCodeObject* code) {
  return (code->co_flags &
          (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) != 0;
}

/* Per-code extra slots (co_extra). `free_fn` runs when the code object dies, and whenever a set
 * replaces an existing value. Return -1 with a Python error set on failure. */
Py_ssize_t ember_shim_request_code_extra_index(freefunc free_fn);
int ember_shim_code_get_extra(PyObject* code, Py_ssize_t index, void** extra);
int ember_shim_code_set_extra(PyObject* code, Py_ssize_t index, void* extra);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_FRONTEND_CPYTHON_SHIM_H */
