# syntax=docker/dockerfile:1
# Build stage: the same command as `make build` (scripts/docker-check.sh runs
# it without Docker and compares the binaries). GOWORK=off: the product is
# built as its own module; go.work, for development, also joins the load
# harness's module (loadtest/), which the image does not need.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN GOWORK=off CGO_ENABLED=0 go build -tags nomsgpack -trimpath -buildvcs=false -ldflags="-s -w" -o /out/agentdock ./cmd/server

# Runtime: a static binary on a distroless base, as a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentdock /agentdock
USER nonroot:nonroot
ENV ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 CMD ["/agentdock", "healthcheck"]
ENTRYPOINT ["/agentdock"]
CMD ["serve"]
