// Pixels of a Pillow image read through the Arrow C data interface (Pillow >= 11.2 exports
// images with Image.__arrow_c_array__): one copy straight into a new (H, W, C) uint8 array,
// instead of np.asarray(image), which goes through Image.tobytes() (a Python-driven encoder) and
// then copies again.
//
// Layouts accepted (Pillow's export, see the Pillow docs "Arrow support"): mode "L" is a uint8
// array (format "C") of H * W elements; mode "RGB" is a fixed-size list "+w:4" of uint8 ("C")
// holding R, G, B and a padding byte per pixel (Pillow stores RGB in 4 bytes). Anything else
// (other formats, nulls, wrong lengths, missing buffers) returns None and the caller falls back
// to NumPy. The structs are the Arrow C data interface's (https://arrow.apache.org/docs/format/
// CDataInterface.html), declared here from that specification; the capsules keep ownership
// (nothing is moved or released here).
#include "pil.hpp"

#include <Python.h>

#include <cstring>

#include "kernel_common.hpp"

namespace mmc {

namespace {

struct ArrowSchema {
    const char* format;
    const char* name;
    const char* metadata;
    std::int64_t flags;
    std::int64_t n_children;
    ArrowSchema** children;
    ArrowSchema* dictionary;
    void (*release)(ArrowSchema*);
    void* private_data;
};

struct ArrowArray {
    std::int64_t length;
    std::int64_t null_count;
    std::int64_t offset;
    std::int64_t n_buffers;
    std::int64_t n_children;
    const void** buffers;
    ArrowArray** children;
    ArrowArray* dictionary;
    void (*release)(ArrowArray*);
    void* private_data;
};

// Data pointer of a primitive uint8 array with `need` elements from its offset, or nullptr.
const std::uint8_t* u8_data(const ArrowArray* a, std::int64_t need) {
    if (a == nullptr || a->release == nullptr || a->null_count != 0 || a->n_buffers != 2 ||
        a->buffers == nullptr || a->buffers[1] == nullptr || a->offset < 0 ||
        a->length - a->offset < need) {
        return nullptr;
    }
    return static_cast<const std::uint8_t*>(a->buffers[1]) + a->offset;
}

void strip_pad_scalar(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n_px) {
    for (std::ptrdiff_t p = 0; p < n_px; ++p) {
        dst[3 * p] = src[4 * p];
        dst[3 * p + 1] = src[4 * p + 1];
        dst[3 * p + 2] = src[4 * p + 2];
    }
}

#ifdef MMC_HAVE_AVX512
// 16 pixels per step: VPERMB packs the 48 colour bytes of 64 input bytes to the front.
MMC_AVX512 void strip_pad_vbmi(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n_px) {
    alignas(64) std::uint8_t idx[64];
    for (int i = 0; i < 64; ++i) idx[i] = static_cast<std::uint8_t>(i < 48 ? 4 * (i / 3) + i % 3 : 0);
    const __m512i perm = _mm512_load_si512(idx);
    std::ptrdiff_t p = 0;
    for (; p + 16 <= n_px; p += 16) {
        const __m512i x = _mm512_loadu_si512(src + 4 * p);
        _mm512_mask_storeu_epi8(dst + 3 * p, 0xFFFFFFFFFFFFULL, _mm512_permutexvar_epi8(perm, x));
    }
    strip_pad_scalar(src + 4 * p, dst + 3 * p, n_px - p);
}
#endif

void add_pad_scalar(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n_px) {
    for (std::ptrdiff_t p = 0; p < n_px; ++p) {
        dst[4 * p] = src[3 * p];
        dst[4 * p + 1] = src[3 * p + 1];
        dst[4 * p + 2] = src[3 * p + 2];
        dst[4 * p + 3] = 255;
    }
}

#ifdef MMC_HAVE_AVX512
// 16 pixels per step: VPERMB spreads 48 colour bytes over 64, the padding bytes are set to 255.
MMC_AVX512 void add_pad_vbmi(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n_px) {
    alignas(64) std::uint8_t idx[64];
    for (int i = 0; i < 64; ++i) {
        idx[i] = static_cast<std::uint8_t>(i % 4 == 3 ? 0 : 3 * (i / 4) + i % 4);
    }
    const __m512i perm = _mm512_load_si512(idx);
    const __m512i pad = _mm512_set1_epi32(static_cast<int>(0xFF000000u));
    std::ptrdiff_t p = 0;
    for (; p + 16 <= n_px; p += 16) {
        const __m512i x = _mm512_maskz_loadu_epi8(0xFFFFFFFFFFFFULL, src + 3 * p);
        _mm512_storeu_si512(dst + 4 * p, _mm512_or_si512(_mm512_permutexvar_epi8(perm, x), pad));
    }
    add_pad_scalar(src + 3 * p, dst + 4 * p, n_px - p);
}
#endif

using PadFn = void (*)(const std::uint8_t*, std::uint8_t*, std::ptrdiff_t);

#ifdef MMC_HAVE_AVX512
#define MMC_VBMI_OR_NULL(fn) (fn)
#else
#define MMC_VBMI_OR_NULL(fn) nullptr
#endif

// The VBMI variant where the build and the CPU have it, else the scalar one.
void run_pad([[maybe_unused]] PadFn vbmi, PadFn scalar, const std::uint8_t* src,
             std::uint8_t* dst, std::ptrdiff_t n_px) {
#ifdef MMC_HAVE_AVX512
    if (vbmi != nullptr && cpu_has_avx512()) {
        vbmi(src, dst, n_px);
        return;
    }
#endif
    scalar(src, dst, n_px);
}

// (H, W, 3) -> new (H, W, 4): R, G, B and a padding byte 255, the layout of Pillow's "RGBX".
ImageOut rgbx_pixels(const ImageIn& image) {
    const Shape s = image_shape(image, "rgbx_pixels");
    if (s.c != 3) throw std::invalid_argument("rgbx_pixels: image must have 3 channels");
    ImageOut out({s.h, s.w, std::ptrdiff_t{4}});
    const std::uint8_t* src = image.data();
    std::uint8_t* dst = out.mutable_data();
    const std::ptrdiff_t n_px = s.h * s.w;
    {
        py::gil_scoped_release release;
        run_pad(MMC_VBMI_OR_NULL(add_pad_vbmi), add_pad_scalar, src, dst, n_px);
    }
    return out;
}

py::object pil_pixels(py::object schema_capsule, py::object array_capsule, std::ptrdiff_t h,
                      std::ptrdiff_t w, std::ptrdiff_t c) {
    if (h < 1 || w < 1 || (c != 1 && c != 3)) return py::none();
    auto* schema = static_cast<ArrowSchema*>(
        PyCapsule_GetPointer(schema_capsule.ptr(), "arrow_schema"));
    if (schema == nullptr) throw py::error_already_set();
    auto* array = static_cast<ArrowArray*>(PyCapsule_GetPointer(array_capsule.ptr(), "arrow_array"));
    if (array == nullptr) throw py::error_already_set();
    if (schema->release == nullptr || array->release == nullptr || schema->format == nullptr) {
        return py::none();
    }
    const std::int64_t n_px = static_cast<std::int64_t>(h) * w;
    const std::uint8_t* data = nullptr;
    if (c == 1) {
        if (std::strcmp(schema->format, "C") != 0) return py::none();
        data = u8_data(array, n_px);
    } else {
        if (std::strcmp(schema->format, "+w:4") != 0 || schema->n_children != 1 ||
            schema->children == nullptr || schema->children[0] == nullptr ||
            schema->children[0]->format == nullptr ||
            std::strcmp(schema->children[0]->format, "C") != 0 || array->null_count != 0 ||
            array->n_children != 1 || array->children == nullptr || array->offset < 0 ||
            array->length - array->offset < n_px) {
            return py::none();
        }
        const ArrowArray* child = array->children[0];
        // Element i of the list is child elements 4 (offset + i) .. 4 (offset + i) + 3.
        data = u8_data(child, 4 * (array->offset + n_px));
        if (data != nullptr) data += 4 * array->offset;
    }
    if (data == nullptr) return py::none();
    ImageOut out({h, w, c});
    std::uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        if (c == 1) {
            std::memcpy(dst, data, static_cast<std::size_t>(n_px));
        } else {
            run_pad(MMC_VBMI_OR_NULL(strip_pad_vbmi), strip_pad_scalar, data, dst, n_px);
        }
    }
    return std::move(out);
}

}  // namespace

void register_pil(py::module_& m) {
    m.def("pil_pixels", &pil_pixels, py::arg("schema"), py::arg("array"), py::arg("h"),
          py::arg("w"), py::arg("c"),
          "New uint8 (h, w, c) array of a Pillow 'L' (c = 1) or 'RGB' (c = 3) image from its "
          "Image.__arrow_c_array__() capsules, or None if the export's layout is not the "
          "expected one.");
    m.def("rgbx_pixels", &rgbx_pixels, py::arg("image"),
          "New uint8 (H, W, 4) copy of a uint8 (H, W, 3) image with a fourth byte 255 per pixel "
          "(Pillow's 'RGBX' layout, which Image.frombuffer maps without copying).");
}

}  // namespace mmc
