/* CPython 3.13 frame internals behind shim.h.
 *
 * 3.13 specifics: the frame's code is `f_executable` (a code object for every frame a hook
 * receives from a function call; other kinds of frames are never replaced); the instruction
 * pointer `instr_ptr` points at the current or next instruction, so a fresh frame holds the code
 * start itself; the callee owns the frame as on 3.12, and CPython now exports the function that
 * clears and pops it (_PyEval_FrameClearAndPop), so Ember calls it instead of its own version.
 */
#include <Python.h>

#if PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#include <internal/pycore_ceval.h>
#undef Py_BUILD_CORE

#include "frontend/cpython/shim.h"

void ember_shim_read_frame(struct _PyInterpreterFrame* frame, EmberFrameFields* out) {
  if (!PyCode_Check(frame->f_executable)) {
    out->code = NULL;
    out->func = NULL;
    out->globals = NULL;
    out->builtins = NULL;
    out->localsplus = NULL;
    out->nlocalsplus = 0;
    return;
  }
  PyCodeObject* code = (PyCodeObject*)frame->f_executable;
  out->code = code;
  out->func = frame->f_funcobj;
  out->globals = frame->f_globals;
  out->builtins = frame->f_builtins;
  out->localsplus = frame->localsplus;
  out->nlocalsplus = code->co_nlocalsplus;
}

int ember_shim_frame_started(struct _PyInterpreterFrame* frame) {
  if (!PyCode_Check(frame->f_executable)) {
    return 1;
  }
  return frame->instr_ptr != _PyCode_CODE((PyCodeObject*)frame->f_executable);
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
  if (frame->owner != FRAME_OWNED_BY_THREAD || !PyCode_Check(frame->f_executable)) {
    Py_FatalError("Ember: asked to pop a frame that the thread's data stack does not own");
  }
  PyCodeObject* code = (PyCodeObject*)frame->f_executable;
  if ((PyObject**)frame + code->co_framesize != tstate->datastack_top) {
    Py_FatalError("Ember: asked to pop a frame that is not on top of the data stack");
  }
  _PyEval_FrameClearAndPop(tstate, frame);
}

Py_ssize_t ember_shim_request_code_extra_index(freefunc free_fn) {
  Py_ssize_t index = PyUnstable_Eval_RequestCodeExtraIndex(free_fn);
  if (index < 0 && !PyErr_Occurred()) {
    PyErr_SetString(PyExc_RuntimeError, "Ember: no free co_extra slot in this interpreter");
  }
  return index;
}

int ember_shim_code_get_extra(PyObject* code, Py_ssize_t index, void** extra) {
  return PyUnstable_Code_GetExtra(code, index, extra);
}

int ember_shim_code_set_extra(PyObject* code, Py_ssize_t index, void* extra) {
  return PyUnstable_Code_SetExtra(code, index, extra);
}

#endif
