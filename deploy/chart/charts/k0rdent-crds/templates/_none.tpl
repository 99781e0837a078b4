{{/* This chart has no templates: it only ships CRDs in crds/, which Helm installs first. */}}
