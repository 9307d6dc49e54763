plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "dev.edgexsent.demo"
    compileSdk = 34
    defaultConfig {
        applicationId = "dev.edgexsent.demo"
        minSdk = 24
        targetSdk = 34
        versionCode = 1
        versionName = "0.1.0"
    }
    // The shared on-device logic (tested on the JVM in android_demo/jvm).
    sourceSets["main"].java.srcDir("../../jvm/src/main/java")
    // model_int8.onnx, tokenizer.json, config.json: copy from a bundle (see README).
    sourceSets["main"].assets.srcDir("../../web/model")
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions { jvmTarget = "17" }
}

dependencies {
    implementation("com.microsoft.onnxruntime:onnxruntime-android:1.20.0")
    implementation("com.google.code.gson:gson:2.10.1")
}
