# SPDX-License-Identifier: Apache-2.0
# tests/tls.sh — throw-away certificates for the TLS tests; source after lib.sh.
#
#   tls_make_ca DIR CN              a self-signed test CA: DIR/ca.pem, DIR/ca.key
#   tls_make_server CADIR OUT SAN [CN]
#                                   a server key and certificate signed by the CA in
#                                   CADIR, for the subjectAltName SAN (openssl syntax,
#                                   e.g. "DNS:localhost,IP:127.0.0.1"): OUT/server.pem,
#                                   OUT/server.key, and OUT/ca.pem (a copy of the CA),
#                                   i.e. what `scripts/broker start --tls OUT` wants
#
# Everything is generated at test time under $TEST_DIR (never committed), with
# P-256 keys (fast) and a validity of one day. Output of openssl goes to
# $TEST_DIR/.harness/openssl.log; a failure prints it.

_tls_openssl() {
  local log=$TEST_DIR/.harness/openssl.log
  echo "+ openssl $*" >>"$log"
  openssl "$@" >>"$log" 2>&1 || {
    echo "openssl $* failed:" >&2
    tail -n 20 "$log" >&2
    return 1
  }
}

tls_make_ca() {
  local dir=$1 cn=$2
  mkdir -p "$dir" &&
  _tls_openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
    -days 1 -subj "/CN=$cn" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" &&
  chmod 600 "$dir/ca.key"
}

tls_make_server() {
  local ca=$1 out=$2 san=$3 cn=${4:-${3#*:}}
  cn=${cn%%,*}
  mkdir -p "$out" &&
  _tls_openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
    -subj "/CN=$cn" -keyout "$out/server.key" -out "$out/server.csr" &&
  printf '%s\n' \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=$san" >"$out/server.ext" &&
  _tls_openssl x509 -req -in "$out/server.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca.key" \
    -CAcreateserial -days 1 -extfile "$out/server.ext" -out "$out/server.pem" &&
  chmod 600 "$out/server.key" &&
  cp "$ca/ca.pem" "$out/ca.pem"
}
