// An LLVM pass plugin that calls the runtime's `memlens_atomic(address, bytes)`
// before every atomic read-modify-write (atomicrmw, cmpxchg): clang's sancov
// traces loads and stores (atomic ones included) but not these, so counters
// two threads bump with `__atomic_fetch_add` would go unseen. Hand-written: no
// library instruments atomics alone. `memlens cc` builds it once per LLVM
// version against llvm-N-dev's headers and loads it with -fpass-plugin; it runs
// where sancov does (the end of the optimization pipeline), so the call sits
// next to the instruction the optimized program executes, with its line.
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"

using namespace llvm;

namespace {

struct CountAtomics : PassInfoMixin<CountAtomics> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    SmallVector<Instruction *, 16> atomics;
    for (Function &function : module)
      for (BasicBlock &block : function)
        for (Instruction &inst : block)
          if (isa<AtomicRMWInst>(inst) || isa<AtomicCmpXchgInst>(inst))
            atomics.push_back(&inst);
    if (atomics.empty())
      return PreservedAnalyses::all();
    LLVMContext &context = module.getContext();
    FunctionCallee hook = module.getOrInsertFunction(
        "memlens_atomic", Type::getVoidTy(context),
        PointerType::getUnqual(context), Type::getInt32Ty(context));
    const DataLayout &layout = module.getDataLayout();
    for (Instruction *inst : atomics) {
      Value *address;
      Type *type;
      if (auto *rmw = dyn_cast<AtomicRMWInst>(inst)) {
        address = rmw->getPointerOperand();
        type = rmw->getValOperand()->getType();
      } else {
        auto *cmpxchg = cast<AtomicCmpXchgInst>(inst);
        address = cmpxchg->getPointerOperand();
        type = cmpxchg->getNewValOperand()->getType();
      }
      // The builder takes the instruction's debug location for the call.
      IRBuilder<> builder(inst);
      builder.CreateCall(hook, {address, builder.getInt32(layout.getTypeStoreSize(type))});
    }
    return PreservedAnalyses::none();
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "memlens-atomics", "1", [](PassBuilder &builder) {
            builder.registerOptimizerLastEPCallback(
                [](ModulePassManager &passes, OptimizationLevel) { passes.addPass(CountAtomics()); });
          }};
}
