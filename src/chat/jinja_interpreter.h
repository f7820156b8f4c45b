#pragma once
// Evaluates a parsed template: Jinja2 scoping (a for-loop iteration and a macro call get their
// own frame, `if` does not), loop objects, macros with closures and call blocks, and Python
// semantics for operators. Resource limits make hostile templates fail with an Error instead of
// exhausting memory or time.
#include <memory>
#include <string>
#include <unordered_map>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace specserve::chat::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // rendered text and any single string value
  uint64_t max_steps = 50'000'000;             // evaluated expressions + executed statements
  int max_call_depth = 200;                    // nested macro / caller calls
  size_t max_range = 10'000'000;               // elements range() may produce
};

struct LoopState {
  std::vector<Value> items;
  size_t index = 0;
  Value last_changed;
  bool has_changed = false;
};

class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  std::shared_ptr<Frame> parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits) : limits_(limits) {}

  // Renders `body` with the given variables (plus the built-in globals).
  std::string render(const Body& body, const Dict& context);

  Value eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value call(const Value& callee, CallArgs args, int line);
  // Renders a body in a frame (used by macros); returns the text.
  std::string render_body(const Body& body, const std::shared_ptr<Frame>& frame);

  const RenderLimits& limits() const { return limits_; }
  void check_size(size_t bytes) const;
  void step();
  int& call_depth() { return call_depth_; }
  const std::shared_ptr<Frame>& root_frame() const { return root_; }
  // Namespaces created during the render; emptied when it ends (see render()).
  void track(const std::shared_ptr<Namespace>& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out);
  Flow exec_stmt(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  void assign(const Target& t, const Value& v, const std::shared_ptr<Frame>& frame, int line);
  CallArgs eval_args(const Expr& e, const std::shared_ptr<Frame>& frame, size_t first_arg);

  RenderLimits limits_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::shared_ptr<Frame> globals_;
  std::shared_ptr<Frame> root_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

// Helpers shared with the builtins (jinja_value_ops.cpp, and template_error in jinja_interpreter.cpp).
[[noreturn]] void template_error(const std::string& message);
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Items iterated by `for` (list / tuple elements, dict keys, str chars); Undefined iterates as empty.
std::vector<Value> iterate(const Value& v);
Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp);
bool contains(const Value& container, const Value& item);
// The message an Undefined value carries into an error ("'x' is undefined").
std::string undefined_message(const Value& v);

}  // namespace specserve::chat::jinja
