# nooelint: oelint.var.mandatoryvar.HOMEPAGE,oelint.var.suggestedvar.BUGTRACKER,oelint.var.bbclassextend
# latencyd has no public home nor tracker to name yet, and runs on the
# target only: no native or nativesdk variant.
SUMMARY = "Continuous wake-up latency monitor for real-time Linux"
DESCRIPTION = "latencyd measures wake-up latency the way cyclictest does, \
               one SCHED_FIFO thread per CPU, continuously, and serves HDR \
               histograms and exact maxima as Prometheus metrics and a JSON \
               API; latencyd measure speaks cyclictest's command line and \
               output formats."
SECTION = "console/utils"
CVE_PRODUCT = "latencyd"
LICENSE = "MIT | Apache-2.0"
LIC_FILES_CHKSUM = "file://LICENSE-MIT;md5=35353d1430a9718c89b721fe3d1936e3 \
                    file://LICENSE-APACHE;md5=22a53954e4e0ec258dfce4391e905dac"

PV .= "+git"

# The repository this layer is part of, at the commit its main branch is
# at; a fleet points both at its own mirror and a release's commit in
# local.conf or a bbappend (LATENCYD_SRC_URI, SRCREV), which makes the
# build reproducible.
LATENCYD_CHECKOUT ??= "${@os.path.normpath(d.getVar('FILE_DIRNAME') + '/../../../../..')}"
LATENCYD_SRC_URI ??= "git://${LATENCYD_CHECKOUT};protocol=file;branch=main"
SRC_URI = "${LATENCYD_SRC_URI}"
# nooelint: oelint.vars.autorev
SRCREV ??= "${AUTOREV}"

# Every crate of Cargo.lock with its checksum, written by
# deploy/yocto/update-crates.
require ${BPN}-crates.inc

inherit cargo systemd useradd

# The revision latencyd_build_info reports (build.rs reads it).
export GIT_REVISION_LATENCYD = "${@d.getVar('SRCREV')[:12]}"

SYSTEMD_SERVICE:${PN} = "latencyd.service"
# Installing starts nothing, as with the Debian package and the RPM: a
# SCHED_FIFO thread on every CPU is for the image's owner to decide
# (SYSTEMD_AUTO_ENABLE:latencyd = "enable" in a bbappend).
SYSTEMD_AUTO_ENABLE:${PN} = "disable"

USERADD_PACKAGES = "${PN}"
GROUPADD_PARAM:${PN} = "--system cpu-dma-latency"
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir / \
                       --shell ${base_sbindir}/nologin --user-group latencyd"

do_install:append() {
    install -Dm 0644 ${S}/systemd/latencyd.service ${D}${systemd_system_unitdir}/latencyd.service
    install -Dm 0644 ${S}/config.example.toml ${D}${sysconfdir}/latencyd/latencyd.toml
    install -d ${D}${datadir}/latencyd/systemd ${D}${datadir}/latencyd/udev
    install -m 0644 ${S}/deploy/systemd/latencyd-*.conf ${D}${datadir}/latencyd/systemd/
    install -m 0644 ${S}/deploy/udev/60-cpu-dma-latency.rules ${D}${datadir}/latencyd/udev/
    install -Dm 0644 -t ${D}${datadir}/latencyd/qualify ${S}/deploy/qualify/*.toml
    install -d ${D}${datadir}/latencyd/prometheus ${D}${datadir}/latencyd/grafana/dashboards
    install -m 0644 ${S}/deploy/prometheus/latencyd.rules.yml ${S}/deploy/prometheus/prometheus.yml \
        ${S}/deploy/prometheus/agent.yml ${S}/deploy/prometheus/vmagent.yml \
        ${D}${datadir}/latencyd/prometheus/
    install -m 0644 ${S}/grafana/dashboards/*.json ${D}${datadir}/latencyd/grafana/dashboards/
    install -d ${D}${docdir}/${BPN}
    install -m 0644 ${S}/README.md ${S}/docs/runbooks.md ${D}${docdir}/${BPN}/
}

# Dashboards and rules belong on the monitoring side, not on every board.
PACKAGES =+ "${PN}-dashboards"
FILES:${PN}-dashboards += "${datadir}/latencyd/prometheus ${datadir}/latencyd/grafana"
CONFFILES:${PN} = "${sysconfdir}/latencyd/latencyd.toml"

# The load generators of measure --load and [load], and the font the
# plots are drawn with (meta-oe's ttf-dejavu).
RRECOMMENDS:${PN} = "rt-tests stress-ng ttf-dejavu-sans"
