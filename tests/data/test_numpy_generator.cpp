#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "data/numpy_generator.hpp"

using namespace mgt;

// Golden values from NumPy 1.26.4 (pip install numpy==1.26.4), commands given per block.

namespace {

std::vector<std::uint64_t> raw(std::uint64_t seed, int n) {
  NumpyPcg64 bits(seed);
  std::vector<std::uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(bits.next_uint64());
  return out;
}

std::vector<std::int32_t> int32_draws(std::int32_t low, std::int64_t high) {
  return NumpyGenerator(1234).integers_int32(low, high, 8);
}

std::vector<std::int64_t> int64_draws(std::int64_t low, std::int64_t high) {
  return NumpyGenerator(1234).integers_int64(low, high, 6);
}

}  // namespace

TEST_CASE("SeedSequence pools and generated words match NumPy", "[mock]") {
  // python -c "import numpy as np; s=np.random.SeedSequence(SEED); print(s.pool.tolist(),
  //            s.generate_state(3).tolist())"   for SEED in 0, 1234, 2**40+5
  NumpySeedSequence zero(0);
  CHECK(zero.pool() == std::array<std::uint32_t, 4>{4265667335U, 1328953910U, 1320288413U, 3365567143U});
  CHECK(zero.generate_state32(3) == std::vector<std::uint32_t>{2968811710U, 3677149159U, 745650761U});
  NumpySeedSequence s1234(1234);
  CHECK(s1234.pool() == std::array<std::uint32_t, 4>{2708132060U, 1122953978U, 1431643488U, 1771436U});
  CHECK(s1234.generate_state32(3) == std::vector<std::uint32_t>{2906597030U, 1602421836U, 216676975U});
  // A seed wider than 32 bits enters as two words.
  NumpySeedSequence wide((std::uint64_t{1} << 40) + 5);
  CHECK(wide.pool() == std::array<std::uint32_t, 4>{2635101428U, 3437552004U, 3468235908U, 3153711952U});
  CHECK(wide.generate_state32(3) == std::vector<std::uint32_t>{3767146251U, 3672381269U, 2127416108U});
}

TEST_CASE("PCG64 seeding gives NumPy's state and increment", "[mock]") {
  // python -c "import numpy as np; s=np.random.PCG64(SEED).state['state'];
  //            print(s['state']>>64, s['state']&(2**64-1), s['inc']>>64, s['inc']&(2**64-1))"
  NumpyPcg64 zero(0);
  CHECK(zero.state() == Uint128{1919014152682489133ULL, 673392287158723043ULL});
  CHECK(zero.increment() == Uint128{4723672219303484034ULL, 6377435431028945833ULL});
  NumpyPcg64 s1234(1234);
  CHECK(s1234.state() == Uint128{1588319588108345834ULL, 17769945453465719817ULL});
  CHECK(s1234.increment() == Uint128{5821178591299037774ULL, 15056972703358403365ULL});
}

TEST_CASE("PCG64 raw outputs match NumPy", "[mock]") {
  // python -c "import numpy as np; print([int(x) for x in np.random.PCG64(SEED).random_raw(6)])"
  CHECK(raw(0, 6) == std::vector<std::uint64_t>{11749869230777074271ULL, 4976686463289251617ULL,
                                                755828109848996024ULL, 304881062738325533ULL,
                                                15002187965291974971ULL, 16837368535893154894ULL});
  CHECK(raw(1234, 6) == std::vector<std::uint64_t>{18016930633132456890ULL, 7013373421822782593ULL,
                                                   17030886991259909300ULL, 4827373169039523470ULL,
                                                   5886301771240251012ULL, 2178398751884474106ULL});
  CHECK(raw((std::uint64_t{1} << 40) + 5, 2) ==
        std::vector<std::uint64_t>{87427594128977387ULL, 6872972437549564694ULL});
}

TEST_CASE("PCG64 32-bit draws split a 64-bit draw, low half first", "[mock]") {
  NumpyPcg64 halves(0);
  const std::uint64_t first = 11749869230777074271ULL;
  CHECK(halves.next_uint32() == static_cast<std::uint32_t>(first));
  CHECK(halves.next_uint32() == static_cast<std::uint32_t>(first >> 32));
  CHECK(halves.next_uint64() == 4976686463289251617ULL);
}

TEST_CASE("Generator.integers with dtype int32 matches NumPy", "[mock]") {
  // python -c "import numpy as np; print(np.random.default_rng(1234).integers(LOW, HIGH, 8,
  //            dtype=np.int32).tolist())"
  CHECK(int32_draws(0, 1) == std::vector<std::int32_t>(8, 0));
  CHECK(int32_draws(0, 2) == std::vector<std::int32_t>{1, 1, 1, 0, 0, 1, 0, 0});
  CHECK(int32_draws(-5, 5) == std::vector<std::int32_t>{4, 4, 4, -2, -4, 4, -4, -3});
  CHECK(int32_draws(0, 3) == std::vector<std::int32_t>{2, 2, 2, 1, 0, 2, 0, 0});
  CHECK(int32_draws(1, 4096) ==
        std::vector<std::int32_t>{4011, 4000, 4046, 1557, 702, 3781, 430, 1072});
  CHECK(int32_draws(0, 2147483647) ==
        std::vector<std::int32_t>{2103139804, 2097446776, 2121586239, 816464123, 367992409,
                                  1982656189, 225255238, 561980200});
  // The full 32-bit range takes raw halves (Lemire's method cannot).
  CHECK(int32_draws(-2147483647 - 1, 2147483648LL) ==
        std::vector<std::int32_t>{2058795962, 2047409907, 2095688833, -514555401, -1411498828,
                                  1817828732, -1696973170, -1023523246});
  // Ranges that reject a quarter and a eighth of the draws.
  CHECK(int32_draws(-2147483647 - 1, 1073741824) ==
        std::vector<std::int32_t>{1007226059, 998686518, 1034895712, -922787463, -1809600790,
                                  -1304513347, -1119600076, -420751045});
  CHECK(int32_draws(0, 1610612736) ==
        std::vector<std::int32_t>{1577354853, 1591189680, 612348092, 275994307, 1486992142,
                                  168941429, 421485150, 223521649});
  CHECK_THROWS_AS(NumpyGenerator(0).integers_int32(5, 5, 1), Error);
  CHECK_THROWS_AS(NumpyGenerator(0).integers_int32(0, 2147483649LL, 1), Error);
}

TEST_CASE("A buffered 32-bit half carries over to the next integers call", "[mock]") {
  // g=np.random.default_rng(1234); g.integers(0,100,3,dtype=np.int32); g.integers(0,100,3,
  // dtype=np.int32); g.bit_generator.random_raw(1)  ->  [97, 97, 98] [38, 17, 92] [4827373169039523470]
  NumpyGenerator g(1234);
  CHECK(g.integers_int32(0, 100, 3) == std::vector<std::int32_t>{97, 97, 98});
  CHECK(g.integers_int32(0, 100, 3) == std::vector<std::int32_t>{38, 17, 92});
  CHECK(g.bit_generator().next_uint64() == 4827373169039523470ULL);
}

TEST_CASE("Generator.integers with dtype int64 matches NumPy", "[mock]") {
  // python -c "import numpy as np; print(np.random.default_rng(1234).integers(LOW, HIGH, 6,
  //            dtype=np.int64).tolist())"
  CHECK(int64_draws(0, 10) == std::vector<std::int64_t>{9, 9, 9, 3, 1, 9});
  CHECK(int64_draws(0, 4294967296LL) ==
        std::vector<std::int64_t>{4206279610LL, 4194893555LL, 4243172481LL, 1632928247LL,
                                  735984820LL, 3965312380LL});
  CHECK(int64_draws(0, 4294967297LL) ==
        std::vector<std::int64_t>{4194893556LL, 1632928248LL, 3965312381LL, 1123960402LL,
                                  1370511430LL, 507197983LL});
  CHECK(int64_draws(-4611686018427387904LL, 4611686018427387904LL) ==
        std::vector<std::int64_t>{4396779298138840541LL, -1104999307515996608LL,
                                  3903757477202566746LL, -2197999433907626169LL,
                                  -1668535132807262398LL, -3522486642485150851LL});
  CHECK(int64_draws(0, 6917529027641081856LL) ==
        std::vector<std::int64_t>{6756348987424671333LL, 2630015033183543472LL,
                                  6386582621722465987LL, 1810264938389821301LL,
                                  2207363164215094129LL, 816899531956677789LL});
  CHECK(int64_draws(INT64_MIN, INT64_MAX) ==
        std::vector<std::int64_t>{8793558596277681081LL, -2209998615031993216LL,
                                  7807514954405133491LL, -4395998867815252339LL,
                                  -3337070265614524797LL, -7044973284970301703LL});
}

TEST_CASE("The mock lengths: default_rng 0, integers 1 to 4096, 100000 int32", "[mock]") {
  // l=np.random.default_rng(0).integers(1,4096,100000,dtype=np.int32)
  // print(l[:16].tolist(), l[-4:].tolist(), int(l.sum()), l.min(), l.max())
  NumpyGenerator g(0);
  auto lengths = g.integers_int32(1, 4096, 100000);
  REQUIRE(lengths.size() == 100000);
  CHECK(std::vector<std::int32_t>(lengths.begin(), lengths.begin() + 16) ==
        std::vector<std::int32_t>{3484, 2609, 2094, 1105, 1261, 168, 309, 68, 718, 3331, 2660, 3738,
                                  2063, 2485, 3976, 2988});
  CHECK(std::vector<std::int32_t>(lengths.end() - 4, lengths.end()) ==
        std::vector<std::int32_t>{2592, 61, 100, 769});
  CHECK(std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0}) == 204637097);
  CHECK(*std::min_element(lengths.begin(), lengths.end()) == 1);
  CHECK(*std::max_element(lengths.begin(), lengths.end()) == 4095);
  // ... and the generator is where NumPy's is afterwards: g.bit_generator.random_raw(2)
  CHECK(g.bit_generator().next_uint64() == 10487998195364162128ULL);
  CHECK(g.bit_generator().next_uint64() == 17393421383694643567ULL);
}
