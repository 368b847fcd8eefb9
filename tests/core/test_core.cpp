#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>

#include "core/atomic_file.hpp"
#include "core/message_text.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/mapped_file.hpp"
#include "core/md5.hpp"
#include "core/program_main.hpp"
#include "test_paths.hpp"

using namespace mgt;

TEST_CASE("md5 matches RFC 1321 test vectors", "[core]") {
  CHECK(md5_hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(md5_hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(md5_hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890") ==
        "57edf4a22be3c955ac49da2e2107b67a");
  // 55 and 56 bytes straddle the one-block/two-block padding boundary.
  CHECK(md5_hex(std::string(55, 'a')) == "ef1772b6dff9a122358552954ad0df65");
  CHECK(md5_hex(std::string(56, 'a')) == "3b0c8ac703f828b04c6c197006d17218");
}

TEST_CASE("python_float_repr prints like Python's repr", "[core]") {
  CHECK(python_float_repr(1.0) == "1.0");
  CHECK(python_float_repr(0.969) == "0.969");
  CHECK(python_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(123456789012345.0) == "123456789012345.0");
  CHECK(python_float_repr(-2.5) == "-2.5");
  CHECK(python_float_repr(0.0) == "0.0");
}

TEST_CASE("json_quote escapes like json.dumps(ensure_ascii=True)", "[core]") {
  CHECK(json_quote("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  CHECK(json_quote("caf\xc3\xa9") == "\"caf\\u00e9\"");
  CHECK(json_quote("\xf0\x9f\x98\x80") == "\"\\ud83d\\ude00\"");
  CHECK(json_quote(std::string("\x01", 1)) == "\"\\u0001\"");
}

TEST_CASE("AtomicFile appears only on commit", "[core]") {
  auto dir = test::scratch_dir("atomic_file");
  auto path = dir + "/out.txt";
  {
    AtomicFile f(path);
    f.write("hello");
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::exists(f.temp_path()));
  }
  CHECK_FALSE(std::filesystem::exists(path));  // abandoned: nothing left behind
  CHECK(std::filesystem::is_empty(dir));
  {
    AtomicFile f(path);
    f.write(std::string(3 << 20, 'x'));  // larger than the buffer
    f.write("tail");
    f.commit();
  }
  MappedFile m(path);
  CHECK(m.size() == (3u << 20) + 4);
  CHECK(m.view().substr(m.size() - 4) == "tail");
}

TEST_CASE("an AtomicFile destination is checked before the work that fills it", "[core]") {
  auto dir = test::scratch_dir("atomic_destination");
  CHECK_NOTHROW(check_atomic_destination(dir + "/out.json", "--output"));
  CHECK_NOTHROW(check_atomic_destination("relative-out.json", "--output"));  // the working directory
  CHECK_THROWS_WITH(check_atomic_destination(dir + "/missing/out.json", "--output"),
                    Catch::Contains("--output " + dir + "/missing/out.json: directory") &&
                        Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(check_atomic_destination(dir, "--output"), Catch::Contains("is a directory"));
}

TEST_CASE("text quoted in a message is one bounded line", "[core]") {
  CHECK(quoted_for_message("969,30,1") == "'969,30,1'");
  CHECK(quoted_for_message("a\nb\tc\r\x01\x7f") == "'a\\nb\\tc\\r\\x01\\x7f'");
  CHECK(quoted_for_message(std::string(100, '1'), 4) == "'1111'... (100 bytes)");
  CHECK(quoted_for_message("caf\xc3\xa9") == "'caf\xc3\xa9'");  // UTF-8 as it is
}

TEST_CASE("MappedFile reports a missing file by name", "[core]") {
  try {
    MappedFile m("/nonexistent/file.idx");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/file.idx") != std::string::npos);
  }
}

#include "core/utf8.hpp"

TEST_CASE("utf8 decoding rejects malformed sequences", "[core]") {
  std::size_t pos = 0;
  std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  CHECK(utf8::decode_next(s, pos) == U'a');
  CHECK(utf8::decode_next(s, pos) == U'\u00e9');
  CHECK(utf8::decode_next(s, pos) == U'\u20ac');
  CHECK(utf8::decode_next(s, pos) == U'\U0001F600');
  CHECK(pos == s.size());
  CHECK_FALSE(utf8::find_invalid(s).has_value());
  CHECK(utf8::find_invalid("abcdefghij\xc3").value() == 10);     // truncated
  CHECK(utf8::find_invalid("ab\xc0\xaf").value() == 2);          // overlong '/'
  CHECK(utf8::find_invalid("\xed\xa0\x80").value() == 0);        // surrogate
  CHECK(utf8::find_invalid("ok\xff").value() == 2);
  std::string round;
  for (char32_t cp : {U'a', U'\u00e9', U'\u20ac', U'\U0001F600'}) utf8::append(round, cp);
  CHECK(round == s);
}

TEST_CASE("a program out of memory says so in words, with the failure exit code", "[core]") {
  const std::string path = test::scratch_dir("run_program_bad_alloc") + "/err.txt";
  std::fflush(stderr);
  const int saved = dup(fileno(stderr));
  FILE* capture = std::fopen(path.c_str(), "w");
  REQUIRE(capture != nullptr);
  dup2(fileno(capture), fileno(stderr));
  const int code = run_program("prog", []() -> int { throw std::bad_alloc(); });
  std::fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);
  std::fclose(capture);
  CHECK(code == kExitFailure);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "prog: out of memory: the job needs more memory than this process could allocate\n");
}
