// Placeholder so the backend library has a translation unit before the CPU ops land.
namespace specserve::cpu {}
