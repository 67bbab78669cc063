/* CPython 3.11 frame internals behind shim.h.
 *
 * 3.11 specifics: the frame names its function `f_func` and its code `f_code`; `prev_instr` points
 * at the code unit before the next instruction, so a fresh frame holds "code start - 1"; and the
 * *caller* (_PyEval_Vector) clears and pops the frame after the eval function returns, so a hook
 * that answers a frame without evaluating it leaves the frame alone.
 */
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "frontend/cpython/shim.h"

void ember_shim_read_frame(struct _PyInterpreterFrame* frame, EmberFrameFields* out) {
  out->code = frame->f_code;
  out->func = (PyObject*)frame->f_func;
  out->globals = frame->f_globals;
  out->builtins = frame->f_builtins;
  out->localsplus = frame->localsplus;
  out->nlocalsplus = frame->f_code->co_nlocalsplus;
}

int ember_shim_frame_started(struct _PyInterpreterFrame* frame) {
  return frame->prev_instr != _PyCode_CODE(frame->f_code) - 1;
}

int ember_shim_frame_has_frame_object(struct _PyInterpreterFrame* frame) {
  return frame->frame_obj != NULL;
}

int ember_shim_frame_owned_by_thread(struct _PyInterpreterFrame* frame) {
  return frame->owner == FRAME_OWNED_BY_THREAD;
}

int ember_shim_frame_starts_chunk(PyThreadState* tstate, struct _PyInterpreterFrame* frame) {
  return tstate->datastack_chunk != NULL &&
         (PyObject**)frame == &tstate->datastack_chunk->data[0];
}

int ember_shim_datastack_chunk_count(PyThreadState* tstate) {
  int count = 0;
  for (_PyStackChunk* chunk = tstate->datastack_chunk; chunk != NULL; chunk = chunk->previous) {
    ++count;
  }
  return count;
}

void ember_shim_dispose_unrun_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame) {
  /* The caller owns the frame on 3.11: it clears and pops it when the hook returns. */
  (void)tstate;
  (void)frame;
}

Py_ssize_t ember_shim_request_code_extra_index(freefunc free_fn) {
  Py_ssize_t index = _PyEval_RequestCodeExtraIndex(free_fn);
  if (index < 0 && !PyErr_Occurred()) {
    PyErr_SetString(PyExc_RuntimeError, "Ember: no free co_extra slot in this interpreter");
  }
  return index;
}

int ember_shim_code_get_extra(PyObject* code, Py_ssize_t index, void** extra) {
  return _PyCode_GetExtra(code, index, extra);
}

int ember_shim_code_set_extra(PyObject* code, Py_ssize_t index, void* extra) {
  return _PyCode_SetExtra(code, index, extra);
}

#endif
