# Sourced by .ci/run and .ci/redis62.sh: tests/clocks.rs fakes each hotrank
# process's clock with libfaketime, which PyPI's libfaketime package ships
# built; installed once under the target dir, named by HOTRANK_LIBFAKETIME.
lft="${CARGO_TARGET_DIR:-target}/libfaketime"
lft_so="libfaketime/vendor/libfaketime/src/libfaketime.so.1"
if [ ! -f "$lft/$lft_so" ]; then
  python3 -m pip install -q --no-deps --target "$lft" libfaketime==3.0.1
fi
HOTRANK_LIBFAKETIME="$(realpath "$lft/$lft_so")"
export HOTRANK_LIBFAKETIME
