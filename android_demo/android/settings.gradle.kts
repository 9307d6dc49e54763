// Native Android demo. NOT built on the edge-xsent development machines (no Android SDK,
// no Google Maven); its tokenizer/pooling/similarity code is ../jvm, tested there.
pluginManagement { repositories { google(); mavenCentral(); gradlePluginPortal() } }
dependencyResolutionManagement { repositories { google(); mavenCentral() } }
rootProject.name = "edge-xsent-demo"
include(":app")
