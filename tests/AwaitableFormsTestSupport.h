// SPDX-License-Identifier: BSL-1.0
#pragma once

// The capture kinds of the awaitable-forms matrix (AwaitableFormsTest,
// AsioAwaitableFormsTest): every kind of lambda that GCC 12 compiles
// correctly inside a co_await expression, each trivially destructible.
// They are macros so that each lambda is written inside the co_await
// expression of the form that uses it, as a user writes it (a lambda
// returned by a helper function would be a different shape).

#include <string_view>

namespace coexec::test {

inline constexpr std::string_view kTwenty = "twenty characters...";
static_assert(kTwenty.size() == 20);

}  // namespace coexec::test

// The callables, for a form: each returns 42, from what it captured (20)
// where it captured anything. X(form, kind, callable); the callables use the
// names COEXEC_FORM_LOCALS declares.
#define COEXEC_CAPTURE_KINDS(X, form)            \
  X(form, captureless, [] { return 42; })        \
  X(form, reference, [&] { return local + 22; }) \
  X(form, pointer, [p] { return *p + 22; })      \
  X(form, integer, [n] { return n + 22; })       \
  X(form, stringView, [v] { return static_cast<int>(v.size()) + 22; })

// What the callables capture: `local` is an int that lives as long as the
// code that declares these (the caller's `int& local` where the task may
// outlive the function that submits it).
#define COEXEC_FORM_CAPTURES(localDeclaration)      \
  localDeclaration;                                 \
  const int* p = &local;                            \
  int n = 20;                                       \
  const std::string_view v = coexec::test::kTwenty; \
  (void)local;                                      \
  (void)p;                                          \
  (void)n;                                          \
  (void)v
#define COEXEC_FORM_LOCALS COEXEC_FORM_CAPTURES(int local = 20)
