# multiprom as a container image: `docker build -t multiprom .`
#
# Two stages: the binary is built by the release recipe (`dist/build.sh
# binary`, what `just dist` packs into the tarball) with the workspace's
# minimum Rust (the rust-version in Cargo.toml) and the locked
# dependencies, then copied into
# distroless's `cc` image (glibc and libgcc, no shell, no package manager),
# running as an unprivileged user. The build image and the runtime image are
# the same Debian release, so the binary's glibc is the one it runs on.

FROM rust:1.88-bookworm AS build
WORKDIR /src
COPY . .
RUN bash dist/build.sh binary /dist \
 && install -D -m 0755 /dist/multiprom-*/multiprom /out/multiprom \
 && /out/multiprom --version

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/multiprom /usr/local/bin/multiprom
# The default port; serve listens on loopback unless told otherwise, so the
# default command below opens it to the pod or container network.
EXPOSE 9478
USER nonroot
ENTRYPOINT ["/usr/local/bin/multiprom"]
CMD ["serve", "--dir", "/run/prom", "--listen", "0.0.0.0:9478"]
