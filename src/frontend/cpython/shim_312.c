/* CPython 3.12 frame internals behind shim.h.
 *
 * 3.12 specifics: the frame names its function `f_funcobj` and its code `f_code`; `prev_instr`
 * keeps the 3.11 meaning (a fresh frame holds "code start - 1"); and the *callee* owns the frame:
 * _PyEval_EvalFrameDefault clears and pops it when it returns. A hook that answers a frame without
 * evaluating it must therefore release it itself, and none of the functions that do so is
 * exported (notes/pep523.md, section 1), hence Ember's own version below.
 *
 * The internal headers need `_PyGC_FINALIZED` undefined when compiled as C (cpython gh-105268).
 */
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000

#undef _PyGC_FINALIZED
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "frontend/cpython/shim.h"

void ember_shim_read_frame(struct _PyInterpreterFrame* frame, EmberFrameFields* out) {
  out->code = frame->f_code;
  out->func = frame->f_funcobj;
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

/* Drops the frame's references: the stack slots in use (arguments, locals, then the value stack,
 * all below `stacktop`), the optional locals mapping, the function and finally the code. The
 * frame is not linked as the thread's current frame at hook time, so finalizers triggered here
 * cannot see it; they may push frames of their own, which land above it and are gone again
 * before the pop below. */
static void clear_frame_references(PyThreadState* tstate, _PyInterpreterFrame* frame) {
  if (frame->frame_obj != NULL) {
    Py_FatalError("Ember: asked to clear a frame that a frame object refers to");
  }
  /* Deallocations below may recurse; account for this C level as CPython does. */
  tstate->c_recursion_remaining--;
  for (int i = 0; i < frame->stacktop; i++) {
    Py_XDECREF(frame->localsplus[i]);
  }
  Py_XDECREF(frame->f_locals);
  Py_DECREF(frame->f_funcobj);
  Py_DECREF(frame->f_code);
  tstate->c_recursion_remaining++;
}

/* Pops the frame off the thread's data stack. When the frame opened its chunk, the chunk goes back
 * to the arena allocator (the one CPython allocated it from) and the previous chunk becomes
 * current again at the offset recorded when this one was pushed. */
static void pop_frame(PyThreadState* tstate, _PyInterpreterFrame* frame) {
  PyObject** base = (PyObject**)frame;
  _PyStackChunk* chunk = tstate->datastack_chunk;
  if (base != &chunk->data[0]) {
    tstate->datastack_top = base;
    return;
  }
  _PyStackChunk* previous = chunk->previous;
  if (previous == NULL) {
    Py_FatalError("Ember: the frame to pop opens the thread's root data-stack chunk");
  }
  tstate->datastack_chunk = previous;
  tstate->datastack_top = &previous->data[previous->top];
  tstate->datastack_limit = (PyObject**)((char*)previous + previous->size);
  PyObjectArenaAllocator arena;
  PyObject_GetArenaAllocator(&arena);
  arena.free(arena.ctx, chunk, chunk->size);
}

void ember_shim_dispose_unrun_frame(PyThreadState* tstate, struct _PyInterpreterFrame* frame) {
  if (frame->owner != FRAME_OWNED_BY_THREAD) {
    Py_FatalError("Ember: asked to pop a frame that the thread's data stack does not own");
  }
  if ((PyObject**)frame + frame->f_code->co_framesize != tstate->datastack_top) {
    Py_FatalError("Ember: asked to pop a frame that is not on top of the data stack");
  }
  clear_frame_references(tstate, frame);
  pop_frame(tstate, frame);
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
