// Whether this test binary runs under a sanitizer: tests that measure time
// or resident memory assert those only without one (ASan and TSan slow
// everything down, and ASan's quarantine keeps freed memory on purpose).
#ifndef GRAPHRUN_TESTS_SANITIZERS_H_
#define GRAPHRUN_TESTS_SANITIZERS_H_

namespace graphrun {

// --config=tsan undefines __SANITIZE_THREAD__ (see .bazelrc) and defines
// GRAPHRUN_TSAN instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(GRAPHRUN_TSAN)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace graphrun

#endif  // GRAPHRUN_TESTS_SANITIZERS_H_
