// Ember's per-code-object state, kept in a co_extra slot: the decision to pass every frame of the
// code through (made once), and for each FrameCompiler the list of cache entries.
//
// Needs: the GIL for every call; prepare_code_caches() before the hook uses any of it.
// Guarantees: a lookup that runs Python code (guards, compilers) works on a snapshot that stays
// valid whatever that code does to the cache (entry lists are replaced, never edited in place,
// and entries are shared); entries that are dropped are destroyed only after the cache structure
// is consistent again, because their destructors may run Python code that re-enters it.
// Every code object holding state is in a registry (insertion order), so that clearing and
// forgetting a compiler reach all of them; the co_extra free function unregisters the code.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "frontend/cache_entry.h"

namespace ember::frontend {

enum class SkipReason : uint8_t {
  none,
  generator,       // generator, coroutine or async generator body
  not_a_function,  // module or class body: no CO_OPTIMIZED, locals live in a mapping
  torch_file,
  ember_file,
  stdlib_file,
  generated,       // Ember's own glue code (graph_break.h): it runs the instruction a trace broke at
};
// The reason as text, or nullptr for SkipReason::none.
const char* skip_reason_name(SkipReason reason);

using EntryList = std::vector<std::shared_ptr<CacheEntry>>;
using EntryListRef = std::shared_ptr<const EntryList>;

// What one code object holds for one compiler.
struct CompilerCache {
  FrameCompiler* compiler = nullptr;
  EntryListRef entries;  // most recent first, then moved to front by note_hit(); null when empty
  bool over_limit = false;
  const CacheEntry* last_hit = nullptr;  // compared, never dereferenced
};

class CodeCache {
 public:
  explicit CodeCache(PyCodeObject* code, SkipReason skip) : code_(code), skip_(skip) {}
  CodeCache(const CodeCache&) = delete;
  CodeCache& operator=(const CodeCache&) = delete;

  SkipReason skip() const { return skip_; }
  PyCodeObject* code() const { return code_; }

  // The compiler's state, or nullptr. The pointer is invalidated by any call below and by any
  // Python code (which may clear caches): re-find after running Python.
  const CompilerCache* find(const FrameCompiler* compiler) const;

  // Puts `entry` first in the compiler's list.
  void add_entry(FrameCompiler* compiler, std::shared_ptr<CacheEntry> entry);
  // Records that `entry`, at `index` of the compiler's list, passed. An entry that passes twice in
  // a row moves to the front: a hot entry stops paying for the guards of the ones before it,
  // while calls that alternate between entries do not copy the list on every call
  // (measurements in docs/frame-hook.md).
  void note_hit(FrameCompiler* compiler, const CacheEntry* entry, size_t index);
  // Marks the code as over the cache limit for `compiler` (`newly_marked`: it was not yet) and
  // returns its entries, which the caller drops once it no longer touches the cache.
  EntryListRef mark_over_limit(FrameCompiler* compiler, bool* newly_marked);
  // Removes the state of one compiler, or of all; returns the entries for the caller to drop.
  EntryListRef forget(const FrameCompiler* compiler);
  std::vector<EntryListRef> forget_all();

 private:
  CompilerCache& find_or_add(FrameCompiler* compiler);

  PyCodeObject* code_;  // borrowed: the cache lives exactly as long as the code object
  SkipReason skip_;
  std::vector<CompilerCache> compilers_;
  // Registry links (insertion order).
  CodeCache* prev_ = nullptr;
  CodeCache* next_ = nullptr;
  friend class CodeCacheRegistry;
};

// Reserves the co_extra slot and reads the directories of torch, Ember and the standard library
// (runs Python code: call it outside the hook, with the region paused). Idempotent. Returns false
// with a Python error set on failure.
bool prepare_code_caches();

// The code object's cache, created (with its skip decision) on first use; nullptr with a Python
// error set on failure. Requires prepare_code_caches().
CodeCache* code_cache_for(PyCodeObject* code);
// Marks a code object Ember generated as never to be traced (its cache is created with
// SkipReason::generated). Returns false with a Python error set on failure, or if the code
// already has a cache.
bool mark_generated_code(PyCodeObject* code);
// The code object's cache if it has one (nullptr otherwise, or with an error set on failure).
CodeCache* existing_code_cache(PyCodeObject* code);

// Across every registered code object.
void clear_all_code_caches();
void forget_compiler_everywhere(const FrameCompiler* compiler);
int registered_code_count();

}  // namespace ember::frontend
