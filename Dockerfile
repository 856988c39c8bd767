# sheetd in a container: build on the official Swift image of the toolchain's version
# (Debian bookworm), run on debian:bookworm-slim with only the C libraries the binary
# links. .ci/check-container proves what no Docker engine can here: hadolint is clean,
# the binary's dynamic dependencies are exactly the runtime stage's packages, and those
# packages plus the binary serve /healthz in a minimal bookworm root (--rootfs).
#
#   docker build -t sheetd .
#   docker run --rm sheetd keys new --tenant acme --role app    # prints a key and its line
#   mkdir -p conf && echo "<the printed line>" > conf/keys
#   docker run -p 8080:8080 -v "$PWD/conf:/etc/sheetd:ro" -e SHEETD_AUTH_KEYS=/etc/sheetd/keys sheetd
#   curl -H "Authorization: Bearer <the printed key>" -d '{}' localhost:8080/sessions
#
# Without keys sheetd serves loopback clients only (protected mode): from outside the
# container every request but /healthz gets 403 auth_required. HTTPS: put crt.pem and
# key.pem in conf/ too and add -e SHEETD_TLS_CERT=/etc/sheetd/crt.pem
# -e SHEETD_TLS_KEY=/etc/sheetd/key.pem; the HEALTHCHECK then speaks TLS by itself.
# `docker kill -s HUP` re-reads the keys file (rotation without a restart).

FROM swift:6.3.1-bookworm AS build
# The -dev packages are not pinned: they must match the library versions already in the
# Swift image (pinning them to an older point release makes apt refuse the downgrade).
# They only provide headers and link stubs; the runtime stage pins what ships.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmicrohttpd-dev libjansson-dev libsqlite3-dev libpq-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# --static-swift-stdlib links the Swift runtime and Foundation into the binary, so the
# runtime stage needs no toolchain: only glibc, libstdc++ and the C libraries below.
# deploy/build-release is `swift build -c release` with full LTO, as every release binary is built.
RUN deploy/build-release --static-swift-stdlib --product sheetd \
    && install -D -m 0755 "$(deploy/build-release --static-swift-stdlib --show-bin-path)/sheetd" /out/sheetd

FROM debian:bookworm-slim AS runtime
# Exactly the shared libraries `ldd sheetd` needs (besides glibc and libgcc_s, which
# libc6 brings): libmicrohttpd (HTTP, pulls in GnuTLS: HTTPS and `--check https://`), libjansson (JSON), libsqlite3
# (the durable store), libpq (PostgreSQL's client, for --database), libstdc++ (the statically linked Swift runtime still calls it).
# Versions are bookworm's; when a Debian point release supersedes one, the build fails
# here and .ci/check-container names the new candidate to pin.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libmicrohttpd12=0.9.75-6 \
        libjansson4=2.14-2 \
        libsqlite3-0=3.40.1-2+deb12u2 \
        libpq5=15.20-0+deb12u1 \
        libstdc++6=12.2.0-14+deb12u1 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 sheetd \
    && useradd --system --uid 10001 --gid sheetd --home-dir /var/lib/sheetd --no-create-home --shell /usr/sbin/nologin sheetd \
    && install -d -o sheetd -g sheetd -m 0750 /var/lib/sheetd
COPY --from=build /out/sheetd /usr/local/bin/sheetd
ENV SHEETD_DATA_DIR=/var/lib/sheetd \
    SHEETD_HOST=0.0.0.0 \
    SHEETD_PORT=8080
VOLUME /var/lib/sheetd
WORKDIR /var/lib/sheetd
USER 10001:10001
EXPOSE 8080
# The binary checks itself (GET, exit 0 on a 200): no curl in the image. /healthz needs no
# key, and with SHEETD_TLS_CERT set the check speaks TLS to the same port.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
    CMD ["sheetd", "--check", "http://127.0.0.1:8080/healthz"]
# Exec form: sheetd is PID 1 and receives SIGTERM itself (it stops accepting, finishes
# what is in flight and exits 0; no shell in between to swallow the signal).
STOPSIGNAL SIGTERM
ENTRYPOINT ["sheetd"]
